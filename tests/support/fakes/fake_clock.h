#pragma once

// A manual time::Clock for unit tests: time moves only when the test calls Advance(), and the
// timers that fall due fire then, in deadline order, each seeing the clock at its deadline. No
// test that uses it sleeps.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "time/clock.h"

namespace ktesio::testing {

class FakeClock final : public daemon::time::Clock {
 public:
  explicit FakeClock(int64_t now_unix_ms = 1'750'000'000'000) : now_(now_unix_ms) {}

  int64_t NowUnixMs() const override { return now_; }
  std::unique_ptr<daemon::time::Timer> NewTimer() override {
    return std::make_unique<FakeTimer>(*this);
  }

  // Moves time forward by `by`, firing what falls due on the way (timers armed by a firing
  // timer fire too when they fall due within the same advance).
  void Advance(std::chrono::milliseconds by) {
    const int64_t target = now_ + by.count();
    while (FakeTimer* next = Earliest()) {
      if (next->deadline_ > target) {
        break;
      }
      now_ = next->deadline_;
      next->armed_ = false;
      std::function<void()> fire = std::move(next->fire_);
      fire();  // may destroy `next` or arm timers
    }
    now_ = target;
  }

  // Milliseconds until the earliest armed timer is due; nullopt when none is armed.
  std::optional<int64_t> NextDueIn() const {
    const FakeTimer* next = Earliest();
    if (next == nullptr) {
      return std::nullopt;
    }
    return next->deadline_ - now_;
  }

 private:
  class FakeTimer final : public daemon::time::Timer {
   public:
    explicit FakeTimer(FakeClock& clock) : clock_(clock) { clock_.timers_.insert(this); }
    ~FakeTimer() override { clock_.timers_.erase(this); }

    void Arm(std::chrono::milliseconds delay, std::function<void()> fire) override {
      deadline_ = clock_.now_ + delay.count();
      sequence_ = ++clock_.sequence_;
      fire_ = std::move(fire);
      armed_ = true;
    }
    void Cancel() override {
      armed_ = false;
      fire_ = nullptr;
    }

    FakeClock& clock_;
    int64_t deadline_ = 0;
    uint64_t sequence_ = 0;  // ties fire in arming order
    std::function<void()> fire_;
    bool armed_ = false;
  };

  FakeTimer* Earliest() const {
    FakeTimer* best = nullptr;
    for (FakeTimer* timer : timers_) {
      if (timer->armed_ && (best == nullptr || std::pair(timer->deadline_, timer->sequence_) <
                                                   std::pair(best->deadline_, best->sequence_))) {
        best = timer;
      }
    }
    return best;
  }

  int64_t now_;
  uint64_t sequence_ = 0;
  std::set<FakeTimer*> timers_;
};

}  // namespace ktesio::testing
