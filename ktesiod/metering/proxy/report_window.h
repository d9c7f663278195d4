#pragma once

// How long the proxy holds finished calls' records before it hands them to the ledger as one
// batch (docs/metering.md "Recording: ledger, events, budgets"). A batch is one store
// transaction, and a transaction costs about as much as thirty of the rows in it, so under load
// the window widens. A call after a quiet spell is still handed over after the base window, and
// that is the delay a budget or an operator polling the usage sees.
//
// The window starts at `base`. A batch of at least kBusyBatch records doubles the next window, up
// to `ceiling`; a smaller batch returns it to `base`, and so does a whole window without a call
// since the last hand-over. One window serves all of a proxy's instances: budgets see usage at
// most `ceiling` late, and later than `base` only while the proxy as a whole finishes kBusyBatch
// calls or more per window (at least 8,000 calls/s to widen from 2 ms, 1,600/s to stay at 10 ms).
//
// Thread-safety: not thread-safe (the proxy thread owns it).

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace ktesio::daemon::metering {

class ReportWindow {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kBusyBatch = 16;

  ReportWindow(std::chrono::milliseconds base, std::chrono::milliseconds ceiling)
      : base_(base), ceiling_(std::max(base, ceiling)), current_(base) {}

  // A batch begins at `now` (its first record): the window to wait before handing it over.
  std::chrono::milliseconds Begin(Clock::time_point now) {
    if (now - last_handed_ > current_) {
      current_ = base_;  // the load that widened it has stopped
    }
    return current_;
  }

  // A batch of `records` was handed over at `now`: sets the next window.
  void Handed(size_t records, Clock::time_point now) {
    current_ = records >= kBusyBatch ? std::min(current_ * 2, ceiling_) : base_;
    last_handed_ = now;
  }

 private:
  std::chrono::milliseconds base_;
  std::chrono::milliseconds ceiling_;
  std::chrono::milliseconds current_;
  Clock::time_point last_handed_{};
};

}  // namespace ktesio::daemon::metering
