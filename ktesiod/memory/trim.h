#pragma once

// Gives back memory an idle daemon holds but does not use (docs/operations.md "Memory when
// idle"). Most of ktesiod's resident set is file-backed code: its own binary and the gRPC,
// Protobuf, SQLite and OpenSSL libraries. The kernel maps code 64 KiB around every page touched,
// and start-up (store migration, manifest parsing, reconciliation) touches code that is never
// run again, so an idle daemon keeps several MiB of code resident that nothing uses. A trim:
//
//   * for every file-backed, read-only or executable mapping of a file this process may page
//     out (the kernel allows root, the file's owner, or a user who may write it): marks it
//     MADV_RANDOM, so that a later fault reads the one page it needs instead of a read-ahead
//     window, and asks the kernel to reclaim its pages now (MADV_PAGEOUT, Linux >= 5.4); clean
//     file pages only this process maps are dropped, pages other processes share are left;
//   * returns the malloc heap's free pages to the system (malloc_trim).
//
// The code the daemon runs afterwards faults back in, a page at a time.
//
// Thread-safety: TrimWorkingSet may be called from any thread; IdleTrimmer is thread-safe.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
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
};

// One trim of this process, as described above. Errors: UNIMPLEMENTED where the platform or the
// running kernel has no MADV_PAGEOUT; INTERNAL when /proc/self/maps cannot be read (the next
// trim tries again). A mapping the kernel refuses is skipped, not an error.
absl::StatusOr<TrimReport> TrimWorkingSet();

// Resident set size of this process in KiB (/proc/self/statm), 0 when unknown.
uint64_t ResidentKib();

// What the trimmer watches: calls that have arrived, and calls (streams included) still open.
struct Activity {
  uint64_t calls = 0;
  uint64_t in_flight = 0;
};

// Trims once after every quiet period: when no call arrived during a whole `idle` window, none
// is open, and there was activity since the last trim (start-up counts as activity, so the first
// trim follows the boot). The trim therefore comes between one and two windows after the last
// call ended. Wakes once per `idle` window; never trims twice in a row without activity in
// between. Logs each trim at info; stops for good (with a warning) only where trimming is
// unsupported.
class IdleTrimmer {
 public:
  IdleTrimmer(absl::Duration idle, std::function<Activity()> activity,
              std::shared_ptr<spdlog::logger> log);
  ~IdleTrimmer();  // stops and joins the thread
  IdleTrimmer(const IdleTrimmer&) = delete;
  IdleTrimmer& operator=(const IdleTrimmer&) = delete;

  uint64_t trims() const { return trims_.load(std::memory_order_relaxed); }

 private:
  void Run();

  const absl::Duration idle_;
  const std::function<Activity()> activity_;
  const std::shared_ptr<spdlog::logger> log_;
  std::atomic<uint64_t> trims_{0};
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ktesio::daemon::memory
