// The engine's usage meter over a real store and real files, on a fake clock: ingestion of
// self-reported usage, breaches handed to the owner, retries with backoff while the store
// refuses commits (the store's test-only fault seam), and what is not watched.

#include "engine/usage_meter.h"

#include <fstream>

#include "engine_owner_fixture.h"
#include "gtest/gtest.h"
#include "metering/ingest.h"
#include "status_assertions.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::engine {
namespace {

class UsageMeterTest : public EngineOwnerTest {
 protected:
  void SetUp() override {
    EngineOwnerTest::SetUp();
    UsageMeter::Hooks hooks;
    hooks.on_recorded = [this] { ++recorded_; };
    hooks.on_breach = OnBreach();
    meter_ = std::make_unique<UsageMeter>(io_, Context(), std::move(hooks));
  }
  void TearDown() override {
    meter_.reset();
    EngineOwnerTest::TearDown();
  }

  void WriteUsage(const store::InstanceRow& row, int from, int count, int input) {
    std::ofstream out(metering::UsageFilePath(supervisor::Supervisor::RunDir(row.home), 1),
                      std::ios::app);
    for (int i = from; i < from + count; ++i) {
      out << "KTESIO_USAGE {\"sequence\":" << i << ",\"input_tokens\":" << input
          << ",\"output_tokens\":1}\n";
    }
  }
  uint64_t RunInput(const store::InstanceRow& row) { return Totals(row).run_input; }

  boost::asio::io_context io_;
  std::unique_ptr<UsageMeter> meter_;
  int recorded_ = 0;
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
  EXPECT_TRUE(breach_.runs.empty());
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
  ASSERT_EQ(breach_.runs.size(), 1u);
  EXPECT_EQ(breach_.runs[0], (std::pair<std::string, int64_t>{"u", 1}));
  ASSERT_EQ(breach_.breaches.size(), 1u);
  EXPECT_EQ(breach_.breaches[0].limit, 10);
  ASSERT_TRUE(breach_.limits.tokens_per_run.has_value());
  EXPECT_EQ(*breach_.limits.tokens_per_run, 10u);
  EXPECT_EQ(breach_.limits.action, budget::Action::kStop);
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
