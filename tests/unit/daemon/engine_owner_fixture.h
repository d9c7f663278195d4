#pragma once

// The common ground of the engine owners' unit tests: a real store in a fresh directory, the
// config bridge over it, a fake clock, a health report and a quiet log — the OwnerContext an
// Engine would give — plus the store's fault seam and running instances to charge.

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "budget/budget.h"
#include "engine/owner_context.h"
#include "fakes/fake_clock.h"
#include "gtest/gtest.h"
#include "ktesio/v1/common.pb.h"
#include "spdlog/sinks/null_sink.h"
#include "store_fault_seam.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::engine {

class EngineOwnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::kStoreFaultSeamArmed);
    char templ[] = "/tmp/kt-owner-XXXXXX";
    dir_ = mkdtemp(templ);
    store_ = std::move(store::Store::Open(dir_ + "/state.db")).value();
    config_ = std::make_unique<ConfigBridge>(dir_);
  }
  // Subclasses drop their owner first (it may hold timers of the clock and the store).
  void TearDown() override {
    store_.reset();
    testing::SetStoreFault(false);
    std::filesystem::remove_all(dir_);
  }

  OwnerContext Context() {
    return {store_.get(), config_.get(), &clock_, &health_,
            std::make_shared<spdlog::logger>("t", std::make_shared<spdlog::sinks::null_sink_st>())};
  }

  // A running instance on run 1, metered the given way, with its run and log directories.
  store::InstanceRow Running(const std::string& name, v1::MeteringSource source) {
    v1::AdapterSnapshot snapshot;
    snapshot.set_metering_source(source);
    store::InstanceRow row;
    row.name = name;
    row.kind = "agent";
    row.snapshot = snapshot.SerializeAsString();
    row.state = "running";
    row.home = dir_ + "/agents/" + name;
    row.current_run = 1;
    std::filesystem::create_directories(supervisor::Supervisor::RunDir(row.home));
    std::filesystem::create_directories(row.home + "/logs");
    EXPECT_TRUE(store_->InsertInstance(row).ok());
    EXPECT_TRUE(store_->BeginRun(row.id, 1, clock_.NowUnixMs()).ok());
    return row;
  }
  store::Store::UsageTotals Totals(const store::InstanceRow& row) {
    return store_->Usage(row.id, 1).value();
  }

  // What an owner handed over through its on_breach hook (OnBreach()).
  struct BreachSeen {
    std::vector<std::pair<std::string, int64_t>> runs;  // (instance, run), one per hand-over
    std::vector<budget::Breach> breaches;               // of the last hand-over
    budget::Limits limits;                              // in force at the last hand-over
  };
  std::function<void(const store::InstanceRow&, int64_t, const std::vector<budget::Breach>&,
                     const budget::Limits&)>
  OnBreach() {
    return [this](const store::InstanceRow& row, int64_t run,
                  const std::vector<budget::Breach>& breaches, const budget::Limits& limits) {
      breach_.runs.push_back({row.name, run});
      breach_.breaches = breaches;
      breach_.limits = limits;
    };
  }

  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ConfigBridge> config_;
  testing::FakeClock clock_;
  Health health_;
  BreachSeen breach_;
};

}  // namespace ktesio::daemon::engine
