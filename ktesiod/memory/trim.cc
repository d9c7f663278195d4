#include "memory/trim.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#include <pthread.h>
#endif
#if defined(__linux__)
#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#endif

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ktesio::daemon::memory {

namespace {

#if defined(MADV_PAGEOUT)

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

// Whether the kernel will page out this file's pages for us: root (CAP_FOWNER), the file's
// owner, or a user who may write it (mm/madvise.c can_do_file_pageout). Anything else is left
// alone entirely, MADV_RANDOM included: it would only make later faults slower.
bool MayPageOut(std::string_view path) {
  if (geteuid() == 0) {
    return true;
  }
  char name[4096];
  if (path.size() >= sizeof name) {
    return false;
  }
  std::memcpy(name, path.data(), path.size());
  name[path.size()] = '\0';
  struct stat st {};
  return stat(name, &st) == 0 && (st.st_uid == geteuid() || access(name, W_OK) == 0);
}

// The running kernel knows MADV_PAGEOUT (the headers may be newer than the kernel): asked once.
bool KernelHasPageout() {
  static const bool known = [] {
    const long page = sysconf(_SC_PAGESIZE);
    void* probe = mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe == MAP_FAILED) {
      return false;
    }
    const bool ok = madvise(probe, static_cast<size_t>(page), MADV_PAGEOUT) == 0;
    munmap(probe, static_cast<size_t>(page));
    return ok;
  }();
  return known;
}

#endif  // MADV_PAGEOUT

#if defined(__linux__)

// An address range [start, end).
struct Range {
  uintptr_t start = 0;
  uintptr_t end = 0;
};

// Ranges of non-writable mappings that hold private (anonymous) pages, in memory or swapped
// out: a debugger's breakpoints or a uprobe patched them. Dropping those pages (MADV_DONTNEED
// discards a swapped-out copy too) would silently remove the patch, so ReleaseCode leaves these
// ranges alone. (A mapping of a tmpfs file whose own pages are in swap counts as patched too:
// it is merely not released.) Empty when /proc/self/smaps cannot be read (then
// `readable` is false and nothing is released).
std::vector<Range> PatchedRanges(bool& readable) {
  std::vector<Range> patched;
  FILE* smaps = fopen("/proc/self/smaps", "re");
  readable = smaps != nullptr;
  if (smaps == nullptr) {
    return patched;
  }
  char line[4096 + 128];
  Range current;
  bool candidate = false;
  while (fgets(line, sizeof line, smaps) != nullptr) {
    uintptr_t start = 0;
    uintptr_t end = 0;
    char perms[5] = {};
    uint64_t kib = 0;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s ", &start, &end, perms) == 3) {
      current = {start, end};
      candidate = perms[1] == '-';
    } else if (candidate &&
               (sscanf(line, "Anonymous: %" SCNu64, &kib) == 1 ||
                sscanf(line, "Swap: %" SCNu64, &kib) == 1) &&
               kib > 0) {
      patched.push_back(current);
      candidate = false;  // listed once
    }
    const size_t length = strlen(line);
    if (length > 0 && line[length - 1] != '\n') {
      // The rest of an over-long line (a very long path): not a line of its own.
      for (int c = fgetc(smaps); c != EOF && c != '\n'; c = fgetc(smaps)) {
      }
    }
  }
  fclose(smaps);
  return patched;
}

// Whether an object's code was relocated in place (DT_TEXTREL): then its read-only segments hold
// private copies with the relocations applied, and dropping them would break the code.
bool HasTextRelocations(const dl_phdr_info& info) {
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info.dlpi_phdr[i];
    if (phdr.p_type != PT_DYNAMIC) {
      continue;
    }
    // The dynamic section, as loaded: addresses come from the loader, as integers.
    const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(  // NOLINT(performance-no-int-to-ptr)
        info.dlpi_addr + phdr.p_vaddr);
    for (; dyn->d_tag != DT_NULL; ++dyn) {
      if (dyn->d_tag == DT_TEXTREL ||
          (dyn->d_tag == DT_FLAGS && (dyn->d_un.d_val & DF_TEXTREL) != 0)) {
        return true;
      }
    }
  }
  return false;
}

struct ReleaseWalk {
  const std::vector<Range>* patched = nullptr;
  uintptr_t vdso = 0;
  uintptr_t page = 4096;
  TrimReport* report = nullptr;
};

int ReleaseObject(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto& walk = *static_cast<ReleaseWalk*>(data);
  bool is_vdso = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type == PT_LOAD && phdr.p_offset == 0 && walk.vdso != 0 &&
        info->dlpi_addr + phdr.p_vaddr == walk.vdso) {
      is_vdso = true;
    }
  }
  if (is_vdso || HasTextRelocations(*info)) {
    return 0;
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type != PT_LOAD || (phdr.p_flags & PF_W) != 0) {
      continue;
    }
    // Whole pages inside the segment only: a page it shares with a neighbour stays.
    const uintptr_t start = (info->dlpi_addr + phdr.p_vaddr + walk.page - 1) & ~(walk.page - 1);
    const uintptr_t end = (info->dlpi_addr + phdr.p_vaddr + phdr.p_memsz) & ~(walk.page - 1);
    if (end <= start) {
      continue;
    }
    bool patched = false;
    for (const Range& range : *walk.patched) {
      patched = patched || (range.start < end && start < range.end);
    }
    if (patched) {
      continue;
    }
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the segment's address, from the loader
    if (madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED) == 0) {
      walk.report->mappings += 1;
      walk.report->advised_kib += (end - start) / 1024;
    }
  }
  return 0;
}

#endif  // __linux__

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

absl::StatusOr<TrimReport> ReleaseCode() {
#if !defined(__linux__)
  return absl::UnimplementedError("releasing code mappings needs Linux");
#else
  TrimReport report;
  report.rss_before_kib = ResidentKib();
  bool readable = false;
  const std::vector<Range> patched = PatchedRanges(readable);
  if (!readable) {
    return absl::InternalError(absl::StrCat("cannot read /proc/self/smaps: ", strerror(errno)));
  }
  ReleaseWalk walk;
  walk.patched = &patched;
  walk.vdso = getauxval(AT_SYSINFO_EHDR);
  walk.page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  walk.report = &report;
  // The loader's lock is held during the walk: no object is unloaded under it, so every range
  // advised is still mapped as the segment it was read as. (An object being loaded may already
  // be listed before its relocation is done; its non-writable segments are not relocated.)
  dl_iterate_phdr(ReleaseObject, &walk);
  report.rss_after_kib = ResidentKib();
  return report;
#endif
}

absl::StatusOr<TrimReport> TrimWorkingSet() {
#if !defined(__linux__) || !defined(__GLIBC__)
  return absl::UnimplementedError("trimming the working set needs Linux and glibc");
#else
  TrimReport report;
  report.rss_before_kib = ResidentKib();
#if defined(MADV_PAGEOUT)
  if (KernelHasPageout()) {
    MapsFile maps;
    if (maps.file == nullptr) {
      return absl::InternalError(absl::StrCat("cannot read /proc/self/maps: ", strerror(errno)));
    }
    report.paged_out = true;
    char line[4096 + 128];
    while (fgets(line, sizeof line, maps.file) != nullptr) {
      const size_t length_read = strlen(line);
      if (length_read == 0 || line[length_read - 1] != '\n') {
        // Longer than the buffer (an escaped, very long path): skip the rest of this mapping's
        // line, so that its tail is never read as a line of its own.
        for (int c = fgetc(maps.file); c != EOF && c != '\n'; c = fgetc(maps.file)) {
        }
        continue;
      }
      line[length_read - 1] = '\0';
      uintptr_t start = 0;
      uintptr_t end = 0;
      char perms[5] = {};
      int path_at = 0;
      // "start-end perms offset dev inode   path"
      if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %*s %*s %*s %n", &start, &end, perms,
                 &path_at) < 3 ||
          path_at == 0 || end <= start || !Trimmable(perms, line + path_at) ||
          !MayPageOut(line + path_at)) {
        continue;
      }
      // The address arrives as text from /proc/self/maps: there is no pointer to derive it from.
      void* at = reinterpret_cast<void*>(start);  // NOLINT(performance-no-int-to-ptr)
      const size_t length = end - start;
      // Both are advice: pages the kernel will not reclaim (shared with another process) are
      // simply left as they are.
      (void)madvise(at, length, MADV_RANDOM);
      if (madvise(at, length, MADV_PAGEOUT) == 0) {
        report.mappings += 1;
        report.advised_kib += length / 1024;
      }
    }
  }
#endif  // MADV_PAGEOUT
  // What the kernel would not page out (files this user may not, pages other processes share,
  // a kernel without MADV_PAGEOUT) is at least unmapped from this process.
  absl::StatusOr<TrimReport> released = ReleaseCode();
  if (!released.ok()) {
    return released.status();
  }
  report.mappings += released->mappings;
  report.advised_kib += released->advised_kib;
  malloc_trim(0);
  report.rss_after_kib = ResidentKib();
  return report;
#endif
}

IdleTrimmer::IdleTrimmer(absl::Duration idle, std::function<Activity()> activity,
                         std::function<bool()> booted, absl::Duration settle,
                         std::shared_ptr<spdlog::logger> log, absl::Duration release)
    : idle_(idle),
      release_(release),
      activity_(std::move(activity)),
      booted_(std::move(booted)),
      settle_(settle),
      log_(std::move(log)) {
  thread_ = std::thread([this] { Run(); });
}

IdleTrimmer::~IdleTrimmer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

bool IdleTrimmer::Sleep(absl::Duration duration) {
  absl::MutexLock lock(&mu_);
  return !mu_.AwaitWithTimeout(absl::Condition(&stopping_), duration);
}

bool IdleTrimmer::ReleaseAfterBoot() {
  while (!booted_()) {
    if (!Sleep(absl::Milliseconds(100))) {
      return false;
    }
  }
  if (!Sleep(settle_)) {
    return false;
  }
  Release("start-up code");
  return true;
}

void IdleTrimmer::Release(std::string_view what) {
  absl::StatusOr<TrimReport> report = ReleaseCode();
  if (report.ok()) {
    releases_.fetch_add(1, std::memory_order_relaxed);
    log_->debug("{} released: resident {} KiB -> {} KiB", what, report->rss_before_kib,
                report->rss_after_kib);
  } else {
    log_->debug("{} kept: {}", what, std::string(report.status().message()));
  }
}

void IdleTrimmer::Run() {
#if defined(__GLIBC__)
  pthread_setname_np(pthread_self(), "kt-trim");
#endif
  if (!ReleaseAfterBoot()) {
    return;
  }
  // Calls made while boot was settling are start-up activity, which the first trim follows anyway.
  uint64_t seen = activity_().calls;
  bool code_mapped = false;  // just released
  bool trim_due = true;      // start-up is activity: the first quiet window after it trims
  const absl::Duration tick = std::min(release_, idle_);
  absl::Duration quiet;
  bool was_open = false;  // a call was open at the last look: it ended since, at an unknown time
  for (;;) {
    if (!Sleep(tick)) {
      return;
    }
    const Activity now = activity_();
    if (now.calls != seen || now.in_flight != 0) {
      // A call arrived since the last look, or one is still open (a long stop, a followed log):
      // not quiet yet.
      seen = now.calls;
      code_mapped = true;
      trim_due = true;
      quiet = absl::ZeroDuration();
      was_open = now.in_flight != 0;
      continue;
    }
    if (was_open) {
      was_open = false;  // quiet from this look on, not from the last one
      continue;
    }
    quiet += tick;
    if (trim_due && quiet >= idle_) {
      trim_due = false;
      absl::StatusOr<TrimReport> report = TrimWorkingSet();
      if (!report.ok()) {
        if (absl::IsUnimplemented(report.status())) {
          log_->warn("memory trim off: {}", std::string(report.status().message()));
          return;
        }
        log_->warn("memory trim skipped: {}", std::string(report.status().message()));
        trim_due = true;  // try again after the next quiet window
        quiet = absl::ZeroDuration();
        continue;
      }
      code_mapped = false;  // the trim released it too
      trims_.fetch_add(1, std::memory_order_relaxed);
      log_->info("memory trim: resident {} KiB -> {} KiB ({} mappings, {} KiB advised)",
                 report->rss_before_kib, report->rss_after_kib, report->mappings,
                 report->advised_kib);
    } else if (code_mapped && quiet >= release_) {
      code_mapped = false;
      Release("code");
    }
  }
}

}  // namespace ktesio::daemon::memory
