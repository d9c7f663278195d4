#pragma once

// How long the proxy holds finished calls' records before it hands them to the ledger as one
// batch (docs/metering.md "Recording: ledger, events, budgets"). A batch is one store
// transaction, and a transaction costs about as much as thirty of the rows in it, so under load
// the window widens. A call after a quiet spell is still handed over after the base window, and
// that is the delay a budget or an operator polling the usage sees.
//
// The window starts at `base`. A batch of at least kBusyBatch records doubles the next window, up
// to `ceiling`; a smaller batch returns it to `base`. Budgets therefore see usage at most
// `ceiling` late, and later than `base` only while calls finish at kBusyBatch or more per window.
//
// Thread-safety: not thread-safe (the proxy thread owns it).

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace ktesio::daemon::metering {

class ReportWindow {
 public:
  static constexpr size_t kBusyBatch = 16;

  ReportWindow(std::chrono::milliseconds base, std::chrono::milliseconds ceiling)
      : base_(base), ceiling_(std::max(base, ceiling)), current_(base) {}

  // The window to wait before handing over the batch that has just begun.
  std::chrono::milliseconds current() const { return current_; }

  // A batch of `records` was handed over: sets the next window.
  void Handed(size_t records) {
    current_ = records >= kBusyBatch ? std::min(current_ * 2, ceiling_) : base_;
  }

 private:
  std::chrono::milliseconds base_;
  std::chrono::milliseconds ceiling_;
  std::chrono::milliseconds current_;
};

}  // namespace ktesio::daemon::metering
