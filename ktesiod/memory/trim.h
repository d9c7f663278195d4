#pragma once

// Gives back memory an idle daemon holds but does not use (docs/operations.md "Memory when
// idle"). Most of ktesiod's resident set is file-backed code: its own binary and the gRPC,
// Protobuf, SQLite and OpenSSL libraries. The kernel maps code 64 KiB around every page touched,
// and start-up (store migration, manifest parsing, reconciliation) touches code that is never
// run again, so a daemon keeps several MiB of code mapped that nothing uses. Two measures:
//
//   * ReleaseCode, once boot's work is done and as part of every trim: unmaps the read-only
//     segments of every loaded ELF object (MADV_DONTNEED). The pages stay in the page cache;
//     what runs afterwards maps them back with minor faults. Any user may do this.
//   * TrimWorkingSet, after a quiet period (IdleTrimmer): where the kernel allows it (root, the
//     file's owner or a writer; Linux >= 5.4), first marks each read-only file mapping
//     MADV_RANDOM, so that a later fault reads the one page it needs instead of a read-ahead
//     window, and asks the kernel to reclaim its pages (MADV_PAGEOUT): clean file pages only
//     this process maps leave the page cache, shared ones stay. Then ReleaseCode, then
//     malloc_trim returns the heap's free pages.
//
// Thread-safety: TrimWorkingSet and ReleaseCode may be called from any thread; IdleTrimmer is
// thread-safe.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "spdlog/logger.h"

namespace ktesio::daemon::memory {

struct TrimReport {
  uint64_t mappings = 0;     // file-backed mappings advised
  uint64_t advised_kib = 0;  // their total size
  uint64_t rss_before_kib = 0;
  uint64_t rss_after_kib = 0;
  bool paged_out = false;  // the MADV_PAGEOUT pass ran (the kernel supports it)
};

// One trim of this process, as described above. Errors: UNIMPLEMENTED off Linux or glibc;
// INTERNAL when /proc/self/maps or /proc/self/smaps cannot be read (the next trim tries again).
// A mapping the kernel refuses is skipped, not an error; without MADV_PAGEOUT in the running
// kernel the trim releases code and trims the heap only (paged_out = false).
absl::StatusOr<TrimReport> TrimWorkingSet();

// Releases this process's mappings of code and read-only data without evicting them: for every
// loaded ELF object (the daemon's binary and its shared libraries; not the vDSO, not an object
// with text relocations), the pages of each read-only segment are unmapped with MADV_DONTNEED.
// They stay in the page cache, so what runs afterwards maps them back with a minor fault, no disk
// read. Works for any user. A segment whose pages a debugger or uprobe patched is left alone.
// Errors: UNIMPLEMENTED off Linux; INTERNAL when /proc/self/smaps cannot be read (nothing is
// released).
absl::StatusOr<TrimReport> ReleaseCode();

// Resident set size of this process in KiB (/proc/self/statm), 0 when unknown.
uint64_t ResidentKib();

// What the trimmer watches: calls that have arrived, and calls (streams included) still open.
struct Activity {
  uint64_t calls = 0;
  uint64_t in_flight = 0;
};

// Releases start-up code once boot's work is done, releases the code calls mapped back once they
// have been quiet a moment, and trims once after every quiet period.
//
// The first release (ReleaseCode) waits until `booted` returns true (polled every 100 ms) and
// then `settle` more, so that the launches boot began have run their course. From then on the
// trimmer looks at the activity every `release` (or `idle`, if shorter). Quiet means no call
// arrived since the last look and none is open. After calls, once quiet for `release`: the code
// is released again (ReleaseCode: nothing is evicted, the next call maps back what it runs with
// minor faults). Once quiet for `idle`, and there was activity since the last trim (start-up
// counts, so the first trim follows the boot): a trim (TrimWorkingSet, which releases code too).
// Never releases or trims twice in a row without activity in between. Logs each trim at info,
// each release at debug; stops for good (with a warning) only where trimming is unsupported.
class IdleTrimmer {
 public:
  IdleTrimmer(absl::Duration idle, std::function<Activity()> activity, std::function<bool()> booted,
              absl::Duration settle, std::shared_ptr<spdlog::logger> log,
              absl::Duration release = absl::Seconds(1));
  ~IdleTrimmer();  // stops and joins the thread
  IdleTrimmer(const IdleTrimmer&) = delete;
  IdleTrimmer& operator=(const IdleTrimmer&) = delete;

  uint64_t releases() const { return releases_.load(std::memory_order_relaxed); }
  uint64_t trims() const { return trims_.load(std::memory_order_relaxed); }

 private:
  void Run();
  bool ReleaseAfterBoot();              // false: stopping
  void Release(std::string_view what);  // ReleaseCode, counted and logged at debug
  bool Sleep(absl::Duration duration);  // false: stopping

  const absl::Duration idle_;
  const absl::Duration release_;
  const std::function<Activity()> activity_;
  const std::function<bool()> booted_;
  const absl::Duration settle_;
  const std::shared_ptr<spdlog::logger> log_;
  std::atomic<uint64_t> releases_{0};
  std::atomic<uint64_t> trims_{0};
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ktesio::daemon::memory
