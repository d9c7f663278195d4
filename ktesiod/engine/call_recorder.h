#pragma once

// The ledger side of engine-observed metering: the proxy thread queues each finished call's
// record (thread-safe, and only the first of a batch pays for waking the engine thread); on the
// engine thread the records are charged, one transaction per instance per batch, with budget
// breaches checked in the same transaction. Calls already made must reach the ledger: a batch
// the store refuses is kept (up to a bound) and retried with backoff, and reported as a daemon
// problem until it is recorded. What to do about a breach is the owner's (Hooks::on_breach).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "budget/budget.h"
#include "engine/owner_context.h"
#include "metering/proxy/proxy.h"

namespace ktesio::daemon::engine {

class CallRecorder {
 public:
  struct Hooks {
    // Runs `work` on the engine thread (thread-safe).
    std::function<void(std::function<void()> work)> post;
    // Calls with usage were committed for `row`; all of `records` are in the ledger.
    std::function<void(const store::InstanceRow& row,
                       const std::vector<metering::CallRecord>& records, bool any_known)>
        on_recorded;
    // Breaches were committed with a batch of `run`'s calls; `limits` were in force.
    std::function<void(const store::InstanceRow& row, int64_t run,
                       const std::vector<budget::Breach>& breaches, const budget::Limits& limits)>
        on_breach;
  };
  // What `context` points to outlives the recorder. `max_unrecorded` bounds the retry queue
  // (the oldest records beyond it are dropped and counted).
  CallRecorder(OwnerContext context, Hooks hooks, size_t max_unrecorded = 100000);
  CallRecorder(const CallRecorder&) = delete;
  CallRecorder& operator=(const CallRecorder&) = delete;

  // Any thread (the proxy's): queues a call's record for the ledger.
  void Queue(metering::CallRecord record);
  // Any thread: queues the records of calls that finished together (one lock, at most one
  // wake-up of the engine thread for all of them).
  void Queue(std::vector<metering::CallRecord> records);

  // Engine thread: charges every queued record (Queue posts it; the retry timer repeats it).
  void Flush();

  // Records given up on because the retry queue was full, since the daemon started.
  uint64_t dropped() const { return dropped_; }

 private:
  // Errors: the store's, when the batch could not be committed (the caller retries it).
  absl::Status Record(const std::string& name, const std::vector<metering::CallRecord>& records);
  // Puts `unrecorded` back in front of what came meanwhile and arms the retry.
  void Keep(std::vector<metering::CallRecord> unrecorded, const absl::Status& error);

  const OwnerContext context_;
  Hooks hooks_;
  const size_t max_unrecorded_;
  std::unique_ptr<time::Timer> retry_timer_;
  int retry_attempts_ = 0;
  uint64_t dropped_ = 0;
  absl::Mutex mu_;
  std::vector<metering::CallRecord> pending_ ABSL_GUARDED_BY(mu_);
  bool flush_posted_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ktesio::daemon::engine
