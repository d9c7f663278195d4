#include "telemetry/proc_stats.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "fs/fs.h"

namespace ktesio::daemon::telemetry {
namespace {

// POSIX reads, never a filebuf: libstdc++'s filebuf throws when read() fails, which the /proc
// files of an exiting process do (ESRCH). Any failure reads as "".
std::string ReadSmallFile(const std::string& path) { return fs::ReadFile(path).value_or(""); }

// The fields of /proc/PID/stat after the command name: [0] is field 3 (state).
struct Stat {
  uint64_t utime = 0, stime = 0, cutime = 0, cstime = 0, threads = 0, start_time = 0, vsize = 0,
           rss_pages = 0;
};

std::optional<Stat> ReadStat(pid_t pid) {
  std::string text = ReadSmallFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t close = text.rfind(')');
  if (close == std::string::npos) {
    return std::nullopt;
  }
  std::vector<absl::string_view> f =
      absl::StrSplit(absl::string_view(text).substr(close + 1), ' ', absl::SkipEmpty());
  if (f.size() < 22) {
    return std::nullopt;
  }
  Stat s;
  auto num = [&](size_t field, uint64_t* out) {
    int64_t value = 0;  // cutime/cstime are signed in the kernel's format
    if (absl::SimpleAtoi(f[field - 3], &value) && value > 0) {
      *out = static_cast<uint64_t>(value);
    }
  };
  num(14, &s.utime);
  num(15, &s.stime);
  num(16, &s.cutime);
  num(17, &s.cstime);
  num(20, &s.threads);
  num(22, &s.start_time);
  num(23, &s.vsize);
  num(24, &s.rss_pages);
  return s;
}

void AppendPids(const std::string& text, std::vector<pid_t>* out) {
  std::istringstream in(text);
  pid_t child = 0;
  while (in >> child) {
    out->push_back(child);
  }
}

// Direct children of every thread of `pid` (`threads` from its stat: a single-threaded process
// has one children file to read, no directory to list).
std::vector<pid_t> Children(pid_t pid, uint64_t threads) {
  std::vector<pid_t> out;
  if (threads == 1) {
    AppendPids(ReadSmallFile(absl::StrCat("/proc/", pid, "/task/", pid, "/children")), &out);
    return out;
  }
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) {
    return out;
  }
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') {
      continue;
    }
    AppendPids(ReadSmallFile(absl::StrCat(tasks, "/", entry->d_name, "/children")), &out);
  }
  closedir(dir);
  return out;
}

double Ticks() {
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return ticks;
}

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

std::optional<TreeStats> SampleTree(pid_t root, uint64_t root_start_time, bool include_root) {
  std::optional<Stat> root_stat = ReadStat(root);
  if (!root_stat.has_value() ||
      (root_start_time != 0 && root_stat->start_time != root_start_time)) {
    return std::nullopt;
  }
  TreeStats tree;
  uint64_t ticks = 0;
  auto add = [&](const Stat& s) {
    ticks += s.utime + s.stime + s.cutime + s.cstime;
    tree.resident_bytes += s.rss_pages * PageSize();
    tree.processes += 1;
  };
  if (include_root) {
    add(*root_stat);
  }
  // Depth-first over descendants; a pid seen twice (a race with reparenting) is counted once.
  std::vector<pid_t> pending = Children(root, root_stat->threads);
  std::unordered_set<pid_t> seen;
  while (!pending.empty() && seen.size() < 100000) {
    pid_t pid = pending.back();
    pending.pop_back();
    if (!seen.insert(pid).second) {
      continue;
    }
    if (std::optional<Stat> s = ReadStat(pid); s.has_value()) {
      add(*s);
      std::vector<pid_t> more = Children(pid, s->threads);
      pending.insert(pending.end(), more.begin(), more.end());
    }
  }
  tree.cpu_seconds = static_cast<double>(ticks) / Ticks();
  return tree;
}

SelfStats SampleSelf() {
  SelfStats self;
  if (std::optional<Stat> s = ReadStat(getpid()); s.has_value()) {
    self.cpu_seconds = static_cast<double>(s->utime + s->stime) / Ticks();
    self.resident_bytes = s->rss_pages * PageSize();
    self.virtual_bytes = s->vsize;
    uint64_t boot = 0;
    std::istringstream in(ReadSmallFile("/proc/stat"));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("btime ", 0) == 0 && absl::SimpleAtoi(line.substr(6), &boot)) {
        break;
      }
    }
    self.start_time_seconds =
        static_cast<double>(boot) + static_cast<double>(s->start_time) / Ticks();
  }
  if (DIR* dir = opendir("/proc/self/fd"); dir != nullptr) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') {
        self.open_fds += 1;
      }
    }
    closedir(dir);
    self.open_fds -= 1;  // the directory stream itself
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    self.max_fds = limit.rlim_cur;
  }
  return self;
}

}  // namespace ktesio::daemon::telemetry
