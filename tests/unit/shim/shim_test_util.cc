#include "shim_test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "segments.h"

extern char** environ;

namespace ktesio::daemon::shim::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kReadyFd = 5;

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) {
    out.push_back(s.data());
  }
  out.push_back(nullptr);
  return out;
}

}  // namespace

TempDir::TempDir() {
  std::string templ = (std::filesystem::temp_directory_path() / "shim-test-XXXXXX").string();
  path_ = mkdtemp(templ.data());
  std::filesystem::create_directory(run_dir());
  std::filesystem::create_directory(log_dir());
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ShimProcess::ShimProcess(const TempDir& dir, const ShimArgs& args) {
  std::vector<std::string> argv = {KTESIO_SHIM_PATH, "--run-dir", dir.run_dir(), "--log-dir",
                                   dir.log_dir(),    "--cwd",     dir.path()};
  if (args.ready_fd) {
    argv.insert(argv.end(), {"--ready-fd", std::to_string(kReadyFd)});
  }
  argv.insert(argv.end(), args.flags.begin(), args.flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), args.command.begin(), args.command.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry = *e;
    bool overridden = false;
    for (const std::string& extra : args.extra_env) {
      overridden |= entry.substr(0, entry.find('=') + 1) == extra.substr(0, extra.find('=') + 1);
    }
    if (!overridden) {
      env.emplace_back(entry);
    }
  }
  env.insert(env.end(), args.extra_env.begin(), args.extra_env.end());
  std::vector<char*> argv_ptrs = Pointers(argv);
  std::vector<char*> env_ptrs = Pointers(env);
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2 failed";
    return;
  }
  if (args.reader_gone) {  // as when the launching daemon died before reading the handshake
    close(ready[0]);
    ready[0] = -1;
  }
  pid_ = fork();
  if (pid_ == 0) {
    setsid();  // As the daemon does (it also double-forks; see DaemonDeathTest).
    if (args.ready_fd) {
      // dup2 onto itself would keep FD_CLOEXEC, so clear it explicitly in that case.
      if (ready[1] == kReadyFd) {
        fcntl(kReadyFd, F_SETFD, 0);
      } else {
        dup2(ready[1], kReadyFd);
      }
    }
    execve(argv_ptrs[0], argv_ptrs.data(), env_ptrs.data());
    _exit(126);
  }
  close(ready[1]);
  ready_fd_ = ready[0];
}

ShimProcess::~ShimProcess() {
  if (ready_fd_ >= 0) {
    close(ready_fd_);
  }
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::optional<std::string> ShimProcess::ReadyText(milliseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  std::string text;
  char buf[512];
  for (;;) {
    pollfd p{ready_fd_, POLLIN, 0};
    if (poll(&p, 1, RemainingMs(deadline)) <= 0) {
      return std::nullopt;
    }
    ssize_t n = read(ready_fd_, buf, sizeof(buf));
    if (n <= 0) {
      return text;
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
}

std::optional<int> ShimProcess::Wait(milliseconds timeout) {
  int status = 0;
  bool done = WaitUntil([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout);
  if (!done) {
    return std::nullopt;
  }
  reaped_ = true;
  return status;
}

bool WaitUntil(const std::function<bool()>& condition, milliseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  while (!condition()) {
    if (Clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ReadLog(const std::string& log_dir) {
  std::string all;
  for (std::uint64_t seq : ListSegments(log_dir)) {
    all += ReadFile(log_dir + "/" + SegmentFileName(seq)).value_or("");
  }
  return all;
}

std::vector<Record> ParseRecords(std::string_view log) {
  std::vector<Record> out;
  for (const std::string& line : SplitLines(log)) {
    std::size_t s1 = line.find(' ');
    std::size_t s2 = s1 == std::string::npos ? s1 : line.find(' ', s1 + 1);
    if (s2 == std::string::npos || s1 != 24) {
      ADD_FAILURE() << "malformed record: " << line;
      continue;
    }
    out.push_back({line.substr(0, s1), line.substr(s1 + 1, s2 - s1 - 1), line.substr(s2 + 1)});
  }
  return out;
}

std::vector<std::string> SplitLines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    lines.emplace_back(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  return lines;
}

std::string ProcStat(pid_t pid, int index) {
  std::optional<std::string> stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  std::size_t close = stat ? stat->rfind(')') : std::string::npos;
  if (close == std::string::npos) {
    return "";
  }
  std::istringstream fields(stat->substr(close + 2));
  std::string field;
  for (int i = 0; i <= index && (fields >> field); ++i) {
  }
  return field;
}

bool IsDead(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    return true;
  }
  std::string state = ProcStat(pid, 0);
  return state.empty() || state == "Z" || state == "X";
}

}  // namespace ktesio::daemon::shim::testing
