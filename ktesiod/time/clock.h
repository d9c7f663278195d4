#pragma once

// The time seam: what the daemon's owners read the time from and arm their timers with. The
// daemon runs on SystemClock; unit tests drive a fake (tests/support/fake_clock.h) and so test
// backoffs, windows and escalations without sleeping.
//
// Thread-safety: a Clock and its timers belong to the owner thread (the engine's io_context):
// timers fire there and are armed and cancelled only from there. NowUnixMs() is thread-safe.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "boost/asio/io_context.hpp"

namespace ktesio::daemon::time {

// A one-shot timer.
class Timer {
 public:
  virtual ~Timer() = default;  // cancels
  // Arms the timer: `fire` runs on the owner thread once `delay` has passed, unless Cancel()
  // or another Arm() comes first (either of which drops the pending `fire` unrun).
  virtual void Arm(std::chrono::milliseconds delay, std::function<void()> fire) = 0;
  virtual void Cancel() = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock milliseconds since the Unix epoch: what records and events carry.
  virtual int64_t NowUnixMs() const = 0;
  // A new timer, measured on a monotonic clock (a wall-clock step does not move it).
  virtual std::unique_ptr<Timer> NewTimer() = 0;
};

// The real clock: std::chrono::system_clock for timestamps, Asio steady timers on `io`.
class SystemClock final : public Clock {
 public:
  explicit SystemClock(boost::asio::io_context& io) : io_(io) {}
  int64_t NowUnixMs() const override;
  std::unique_ptr<Timer> NewTimer() override;

 private:
  boost::asio::io_context& io_;
};

// system_clock now in Unix milliseconds (for code without a Clock, e.g. start-up messages).
int64_t SystemNowUnixMs();

}  // namespace ktesio::daemon::time
