#pragma once

// Who gets a metering-proxy connection when local processes open too many (docs/metering.md
// "Connection limits"). Every local process can reach a loopback proxy, so a flood must cost the
// daemon a bounded number of file descriptors and a bounded amount of logging:
//
//   - at most `per_instance` open client connections per instance's listener and `total` over
//     all of them; a connection beyond either cap is closed as soon as it is accepted;
//   - an accept that fails for lack of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM)
//     waits before the next attempt, 10 ms doubling to 1 s, instead of spinning;
//   - refusals and accept failures are summarised in at most one log line per interval, with
//     counts.
//
// Thread-safety: thread-safe (the proxy thread admits; the engine thread reads Snapshot).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ktesio::daemon::metering {

struct AdmissionLimits {
  size_t per_instance = 256;
  size_t total = 4096;
};

class Admission {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  explicit Admission(AdmissionLimits limits, Clock clock = std::chrono::steady_clock::now);

  // Admits a connection to a listener that has `*instance_open` open ones (incremented when
  // admitted). False: refused (counted), close it.
  bool TryAdmit(size_t* instance_open);
  // A connection admitted by TryAdmit ended.
  void Release(size_t* instance_open);

  // An accept failed for lack of resources: how long to wait before accepting again.
  std::chrono::milliseconds OnResourceError();
  void OnAccepted();

  // The summary line due now ("" when nothing happened or the last one was less than an interval
  // ago), e.g. "refused 5120 connections over the caps (per agent 256, total 4096) and 3 accepts
  // failed (Too many open files) in the last 10 s".
  std::string DueReport(const std::string& last_error);
  // Whether refusals or accept errors are waiting for a report (one DueReport held back).
  bool HasUnreported() const;

  struct Pressure {
    size_t open = 0;
    AdmissionLimits limits;
    uint64_t refused_total = 0;
    uint64_t resource_errors_total = 0;
    bool recent = false;  // a refusal or resource error within the last minute
  };
  Pressure Snapshot() const;

  static constexpr std::chrono::seconds kReportInterval{10};
  static constexpr std::chrono::seconds kRecent{60};

 private:
  const AdmissionLimits limits_;
  const Clock clock_;
  mutable absl::Mutex mu_;
  size_t open_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t errors_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_unreported_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t errors_unreported_ ABSL_GUARDED_BY(mu_) = 0;
  std::chrono::milliseconds backoff_ ABSL_GUARDED_BY(mu_){0};
  std::chrono::steady_clock::time_point last_report_ ABSL_GUARDED_BY(mu_){};
  std::chrono::steady_clock::time_point last_trouble_ ABSL_GUARDED_BY(mu_){};
};

}  // namespace ktesio::daemon::metering
