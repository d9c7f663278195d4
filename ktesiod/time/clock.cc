#include "time/clock.h"

#include <utility>

#include "boost/asio/steady_timer.hpp"

namespace ktesio::daemon::time {

namespace {

class SteadyTimer final : public Timer {
 public:
  explicit SteadyTimer(boost::asio::io_context& io) : timer_(io) {}
  ~SteadyTimer() override { Cancel(); }

  void Arm(std::chrono::milliseconds delay, std::function<void()> fire) override {
    // The generation, not the error code, decides: a handler already queued when the timer
    // was re-armed or cancelled sees a newer generation and drops its `fire`.
    const uint64_t armed = ++generation_;
    timer_.expires_after(delay);
    timer_.async_wait([this, armed, fire = std::move(fire),
                       alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
      if (ec || alive.expired() || armed != generation_) {
        return;
      }
      fire();
    });
  }

  void Cancel() override {
    ++generation_;
    timer_.cancel();
  }

 private:
  boost::asio::steady_timer timer_;
  uint64_t generation_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace

int64_t SystemNowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SystemClock::NowUnixMs() const { return SystemNowUnixMs(); }

std::unique_ptr<Timer> SystemClock::NewTimer() { return std::make_unique<SteadyTimer>(io_); }

}  // namespace ktesio::daemon::time
