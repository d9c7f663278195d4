// The engine's usage meter over a real store and real files, on a fake clock: ingestion of
// self-reported usage, breaches handed to the owner, retries with backoff while the store
// refuses commits (the store's test-only fault seam), and what is not watched.

#include "engine/usage_meter.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "fakes/fake_clock.h"
#include "gtest/gtest.h"
#include "ktesio/v1/common.pb.h"
#include "metering/ingest.h"
#include "spdlog/sinks/null_sink.h"
#include "status_assertions.h"
#include "store_fault_seam.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::engine {
namespace {

class UsageMeterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::kStoreFaultSeamArmed);
    char templ[] = "/tmp/kt-meter-XXXXXX";
    dir_ = mkdtemp(templ);
    store_ = std::move(store::Store::Open(dir_ + "/state.db")).value();
    config_ = std::make_unique<ConfigBridge>(dir_);
    UsageMeter::Hooks hooks;
    hooks.on_recorded = [this] { ++recorded_; };
    hooks.on_breach = [this](const store::InstanceRow& row, int64_t run,
                             const std::vector<budget::Breach>& breaches,
                             const budget::Limits& limits) {
      breach_runs_.push_back({row.name, run});
      breaches_ = breaches;
      limits_ = limits;
    };
    meter_ = std::make_unique<UsageMeter>(
        io_, store_.get(), config_.get(), &clock_, &health_,
        std::make_shared<spdlog::logger>("t", std::make_shared<spdlog::sinks::null_sink_st>()),
        std::move(hooks));
  }
  void TearDown() override {
    meter_.reset();
    store_.reset();
    testing::SetStoreFault(false);
    std::filesystem::remove_all(dir_);
  }

  // A running instance on run 1, metered the given way.
  store::InstanceRow Running(const std::string& name, v1::MeteringSource source) {
    v1::AdapterSnapshot snapshot;
    snapshot.set_metering_source(source);
    store::InstanceRow row;
    row.name = name;
    row.kind = "usage";
    row.snapshot = snapshot.SerializeAsString();
    row.state = "running";
    row.home = dir_ + "/agents/" + name;
    row.current_run = 1;
    std::filesystem::create_directories(supervisor::Supervisor::RunDir(row.home));
    EXPECT_TRUE(store_->InsertInstance(row).ok());
    EXPECT_TRUE(store_->BeginRun(row.id, 1, clock_.NowUnixMs()).ok());
    return row;
  }
  void WriteUsage(const store::InstanceRow& row, int from, int count, int input) {
    std::ofstream out(metering::UsageFilePath(supervisor::Supervisor::RunDir(row.home), 1),
                      std::ios::app);
    for (int i = from; i < from + count; ++i) {
      out << "KTESIO_USAGE {\"sequence\":" << i << ",\"input_tokens\":" << input
          << ",\"output_tokens\":1}\n";
    }
  }
  uint64_t RunInput(const store::InstanceRow& row) {
    return store_->Usage(row.id, 1).value().run_input;
  }

  boost::asio::io_context io_;
  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ConfigBridge> config_;
  testing::FakeClock clock_;
  Health health_;
  std::unique_ptr<UsageMeter> meter_;
  int recorded_ = 0;
  std::vector<std::pair<std::string, int64_t>> breach_runs_;
  std::vector<budget::Breach> breaches_;
  budget::Limits limits_;
};

TEST_F(UsageMeterTest, ASelfReportedRunIsWatchedIngestedOnceAndPublished) {
  const store::InstanceRow row = Running("u", v1::METERING_SOURCE_SELF_REPORTED);
  WriteUsage(row, 0, 3, 7);  // written before the watch: taken when it starts
  meter_->Watch(row);
  EXPECT_EQ(meter_->watched(), 1u);
  EXPECT_EQ(RunInput(row), 21u);
  EXPECT_EQ(recorded_, 1);
  meter_->Ingest("u", 1);  // nothing new: nothing recorded twice
  EXPECT_EQ(RunInput(row), 21u);
  EXPECT_EQ(recorded_, 1);
  WriteUsage(row, 3, 1, 5);
  meter_->RunEnded(row);  // the last lines, then no more watching
  EXPECT_EQ(RunInput(row), 26u);
  EXPECT_EQ(meter_->watched(), 0u);
  EXPECT_TRUE(breach_runs_.empty());
}

TEST_F(UsageMeterTest, AnEngineObservedRunIsNotWatched) {
  const store::InstanceRow row = Running("e", v1::METERING_SOURCE_ENGINE_OBSERVED);
  meter_->Watch(row);
  EXPECT_EQ(meter_->watched(), 0u);
  meter_->WatchLive({row});
  EXPECT_EQ(meter_->watched(), 0u);
}

TEST_F(UsageMeterTest, ABreachIsCommittedAndHandedToTheOwnerWithTheLimitsInForce) {
  const store::InstanceRow row = Running("u", v1::METERING_SOURCE_SELF_REPORTED);
  {
    std::ofstream out(row.home + "/config.toml");
    out << "[budget.tokens]\nper_run = 10\n[budget]\nbreach_action = \"stop\"\n";
  }
  meter_->Watch(row);
  WriteUsage(row, 0, 2, 7);  // 16 tokens > 10
  meter_->Ingest("u", 1);
  ASSERT_EQ(breach_runs_.size(), 1u);
  EXPECT_EQ(breach_runs_[0], (std::pair<std::string, int64_t>{"u", 1}));
  ASSERT_EQ(breaches_.size(), 1u);
  EXPECT_EQ(breaches_[0].limit, 10);
  ASSERT_TRUE(limits_.tokens_per_run.has_value());
  EXPECT_EQ(*limits_.tokens_per_run, 10u);
  EXPECT_EQ(limits_.action, budget::Action::kStop);
  EXPECT_EQ(store_->PendingBreaches().value().size(), 1u);
}

TEST_F(UsageMeterTest, RefusedCommitsAreRetriedWithBackoffAndRecordedOnceTheStoreTakesThem) {
  const store::InstanceRow row = Running("u", v1::METERING_SOURCE_SELF_REPORTED);
  meter_->Watch(row);
  testing::SetStoreFault(true);
  WriteUsage(row, 0, 2, 7);
  meter_->Ingest("u", 1);
  EXPECT_EQ(RunInput(row), 0u);
  ASSERT_EQ(health_.Problems().size(), 1u);
  EXPECT_NE(health_.Problems()[0].find("usage lines of run 1 of 'u' are not recorded yet"),
            std::string::npos)
      << health_.Problems()[0];
  EXPECT_NE(health_.Problems()[0].find("retrying every 100 ms"), std::string::npos);
  clock_.Advance(std::chrono::milliseconds(100));  // still refused: the delay doubles
  EXPECT_NE(health_.Problems()[0].find("retrying every 200 ms"), std::string::npos)
      << health_.Problems()[0];
  testing::SetStoreFault(false);
  clock_.Advance(std::chrono::milliseconds(199));
  EXPECT_EQ(RunInput(row), 0u);  // not due yet
  clock_.Advance(std::chrono::milliseconds(1));
  EXPECT_EQ(RunInput(row), 14u);
  EXPECT_TRUE(health_.Problems().empty());
  EXPECT_EQ(recorded_, 1);
}

TEST_F(UsageMeterTest, AnInstanceRemovedMeanwhileEndsItsRetries) {
  const store::InstanceRow row = Running("u", v1::METERING_SOURCE_SELF_REPORTED);
  testing::SetStoreFault(true);
  WriteUsage(row, 0, 1, 7);
  meter_->Ingest("u", 1);
  ASSERT_FALSE(health_.Problems().empty());
  testing::SetStoreFault(false);
  KT_ASSERT_OK(store_->DeleteInstance(row.id));
  clock_.Advance(std::chrono::milliseconds(100));
  EXPECT_TRUE(health_.Problems().empty());
  clock_.Advance(std::chrono::seconds(10));  // no timer left armed
  EXPECT_EQ(recorded_, 0);
}

}  // namespace
}  // namespace ktesio::daemon::engine
