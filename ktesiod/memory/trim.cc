#include "memory/trim.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ktesio::daemon::memory {

namespace {

// Reads /proc/self/maps line by line without allocating per line: the trim runs while the
// daemon is idle and must not itself grow the heap it is about to trim.
struct MapsFile {
  FILE* file = fopen("/proc/self/maps", "re");
  ~MapsFile() {
    if (file != nullptr) {
      fclose(file);
    }
  }
};

// A mapping worth trimming: file-backed ("/..." path, not [vdso] or an anonymous region),
// readable and not writable (code and read-only data; writable pages are private copies the
// kernel could only swap).
bool Trimmable(const char* perms, const char* path) {
  return perms[0] == 'r' && perms[1] == '-' && path[0] == '/';
}

}  // namespace

uint64_t ResidentKib() {
  FILE* statm = fopen("/proc/self/statm", "re");
  if (statm == nullptr) {
    return 0;
  }
  uint64_t size = 0;
  uint64_t resident = 0;
  const bool read = fscanf(statm, "%" SCNu64 " %" SCNu64, &size, &resident) == 2;
  fclose(statm);
  return read ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 1024 : 0;
}

absl::StatusOr<TrimReport> TrimWorkingSet() {
#ifndef MADV_PAGEOUT
  return absl::UnimplementedError(
      "trimming the working set needs MADV_PAGEOUT (Linux 5.4 or later)");
#else
  TrimReport report;
  report.rss_before_kib = ResidentKib();
  MapsFile maps;
  if (maps.file == nullptr) {
    return absl::InternalError(absl::StrCat("cannot read /proc/self/maps: ", strerror(errno)));
  }
  char line[4096 + 128];
  while (fgets(line, sizeof line, maps.file) != nullptr) {
    uintptr_t start = 0;
    uintptr_t end = 0;
    char perms[5] = {};
    int path_at = 0;
    // "start-end perms offset dev inode   path"
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %*s %*s %*s %n", &start, &end, perms,
               &path_at) < 3 ||
        path_at == 0 || end <= start || !Trimmable(perms, line + path_at)) {
      continue;
    }
    // The address arrives as text from /proc/self/maps: there is no pointer to derive it from.
    void* at = reinterpret_cast<void*>(start);  // NOLINT(performance-no-int-to-ptr)
    const size_t length = end - start;
    // Both are advice: a mapping the kernel will not reclaim (shared with another process, a
    // file this user may not page out) is simply left as it is.
    (void)madvise(at, length, MADV_RANDOM);
    if (madvise(at, length, MADV_PAGEOUT) == 0) {
      report.mappings += 1;
      report.advised_kib += length / 1024;
    }
  }
  malloc_trim(0);
  report.rss_after_kib = ResidentKib();
  return report;
#endif
}

IdleTrimmer::IdleTrimmer(absl::Duration idle, std::function<uint64_t()> activity,
                         std::shared_ptr<spdlog::logger> log)
    : idle_(idle), activity_(std::move(activity)), log_(std::move(log)) {
  thread_ = std::thread([this] { Run(); });
}

IdleTrimmer::~IdleTrimmer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void IdleTrimmer::Run() {
  pthread_setname_np(pthread_self(), "kt-trim");
  uint64_t seen = activity_();
  bool active = true;  // start-up is activity: the first quiet window after it trims
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), idle_)) {
        return;
      }
    }
    const uint64_t now = activity_();
    if (now != seen) {
      seen = now;
      active = true;
      continue;
    }
    if (!active) {
      continue;
    }
    active = false;
    absl::StatusOr<TrimReport> report = TrimWorkingSet();
    if (!report.ok()) {
      log_->warn("memory trim off: {}", std::string(report.status().message()));
      return;
    }
    trims_.fetch_add(1, std::memory_order_relaxed);
    log_->info("memory trim: resident {} KiB -> {} KiB ({} mappings, {} KiB advised)",
               report->rss_before_kib, report->rss_after_kib, report->mappings,
               report->advised_kib);
  }
}

}  // namespace ktesio::daemon::memory
