// The ledger side of engine-observed metering over a real store, on a fake clock: batches
// queued from another thread wake the engine once, calls are charged (unknown usage as
// unknown), breaches go to the owner, and refused commits are kept — up to a bound — and
// retried with backoff (the store's fault seam).

#include "engine/call_recorder.h"

#include <fstream>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "engine_owner_fixture.h"
#include "gtest/gtest.h"
#include "status_assertions.h"

namespace ktesio::daemon::engine {
namespace {

class CallRecorderTest : public EngineOwnerTest {
 protected:
  void SetUp() override {
    EngineOwnerTest::SetUp();
    Build(100000);
  }
  void TearDown() override {
    recorder_.reset();
    EngineOwnerTest::TearDown();
  }
  void Build(size_t max_unrecorded) {
    CallRecorder::Hooks hooks;
    hooks.post = [this](std::function<void()> work) {
      if (engine_runs_at_once_) {
        // The engine thread, idle on another CPU, flushes as soon as it is woken.
        ++wake_ups_;
        work();
        return;
      }
      absl::MutexLock lock(&posted_mu_);
      posted_.push_back(std::move(work));
    };
    hooks.on_recorded = [this](const store::InstanceRow& row,
                               const std::vector<metering::CallRecord>& records, bool any_known) {
      recorded_.push_back({row.name, records.size(), any_known});
    };
    hooks.on_breach = OnBreach();
    recorder_ = std::make_unique<CallRecorder>(Context(), std::move(hooks), max_unrecorded);
  }
  // Runs what was posted to the "engine thread".
  size_t RunPosted() {
    std::vector<std::function<void()>> work;
    {
      absl::MutexLock lock(&posted_mu_);
      work.swap(posted_);
    }
    for (auto& fn : work) {
      fn();
    }
    return work.size();
  }
  store::InstanceRow Running(const std::string& name) {
    return EngineOwnerTest::Running(name, v1::METERING_SOURCE_ENGINE_OBSERVED);
  }
  static metering::CallRecord Call(const std::string& instance, uint64_t input, uint64_t output) {
    metering::CallRecord record;
    record.instance = instance;
    record.shape = metering::ApiShape::kChatCompletions;
    record.known = true;
    record.usage = {input, output};
    record.status = 200;
    return record;
  }

  struct Recorded {
    std::string name;
    size_t calls = 0;
    bool any_known = false;
    bool operator==(const Recorded&) const = default;
  };

  std::unique_ptr<CallRecorder> recorder_;
  bool engine_runs_at_once_ = false;  // posted work runs inside Queue
  int wake_ups_ = 0;                  // posts while engine_runs_at_once_
  absl::Mutex posted_mu_;
  std::vector<std::function<void()>> posted_ ABSL_GUARDED_BY(posted_mu_);
  std::vector<Recorded> recorded_;
};

TEST_F(CallRecorderTest, ABatchFromTheProxyThreadWakesTheEngineOnceAndIsChargedPerInstance) {
  const store::InstanceRow a = Running("a");
  const store::InstanceRow b = Running("b");
  std::thread proxy([&] {
    recorder_->Queue(Call("a", 10, 2));
    recorder_->Queue(Call("b", 5, 1));
    recorder_->Queue(Call("a", 3, 4));
  });
  proxy.join();
  EXPECT_EQ(RunPosted(), 1u);  // one wake-up for the whole batch
  EXPECT_EQ(Totals(a).run_input, 13u);
  EXPECT_EQ(Totals(a).run_output, 6u);
  EXPECT_EQ(Totals(b).run_input, 5u);
  EXPECT_EQ(recorded_, (std::vector<Recorded>{{"a", 2, true}, {"b", 1, true}}));
  recorder_->Queue(Call("a", 1, 1));  // the next batch wakes it again
  EXPECT_EQ(RunPosted(), 1u);
  EXPECT_EQ(Totals(a).run_input, 14u);
  EXPECT_TRUE(health_.Problems().empty());
}

TEST_F(CallRecorderTest, TheProxysReportWindowIsHandedOverWholeWithOneWakeUp) {
  const store::InstanceRow a = Running("a");
  const store::InstanceRow b = Running("b");
  recorder_->Queue(std::vector<metering::CallRecord>{});  // an empty window: nothing to wake for
  EXPECT_EQ(RunPosted(), 0u);
  std::vector<metering::CallRecord> window;
  window.push_back(Call("a", 10, 2));
  window.push_back(Call("b", 5, 1));
  window.push_back(Call("a", 3, 4));
  recorder_->Queue(std::move(window));
  // Posted once, then more records arrive before the engine ran: they join the same flush.
  std::vector<metering::CallRecord> next;
  next.push_back(Call("b", 1, 1));
  recorder_->Queue(std::move(next));
  EXPECT_EQ(RunPosted(), 1u);
  EXPECT_EQ(Totals(a).run_input, 13u);
  EXPECT_EQ(Totals(b).run_input, 6u);
  EXPECT_EQ(recorded_, (std::vector<Recorded>{{"a", 2, true}, {"b", 2, true}}));

  // An engine that flushes the moment it is woken still gets the window whole: one wake-up and
  // one transaction per instance, not one per record.
  recorded_.clear();
  engine_runs_at_once_ = true;
  std::vector<metering::CallRecord> busy;
  busy.push_back(Call("a", 1, 1));
  busy.push_back(Call("b", 1, 1));
  busy.push_back(Call("a", 1, 1));
  recorder_->Queue(std::move(busy));
  EXPECT_EQ(wake_ups_, 1);
  EXPECT_EQ(recorded_, (std::vector<Recorded>{{"a", 2, true}, {"b", 1, true}}));
  EXPECT_EQ(Totals(a).run_input, 15u);
}

TEST_F(CallRecorderTest, ACallWithoutUsageIsCountedAsUnknownAndNoted) {
  const store::InstanceRow a = Running("a");
  metering::CallRecord unknown = Call("a", 0, 0);
  unknown.known = false;
  recorder_->Queue(unknown);
  RunPosted();
  EXPECT_EQ(Totals(a).unknown_calls, 1u);
  EXPECT_EQ(Totals(a).run_input, 0u);
  EXPECT_EQ(recorded_, (std::vector<Recorded>{{"a", 1, false}}));
  std::string logs;
  for (const auto& entry : std::filesystem::directory_iterator(a.home + "/logs")) {
    std::ifstream in(entry.path());
    logs += std::string(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_NE(
      logs.find(
          "without usage (none from the provider, or the call was cut off): counted as unknown"),
      std::string::npos)
      << logs;
}

TEST_F(CallRecorderTest, CallsOfARemovedInstanceAreDroppedQuietly) {
  recorder_->Queue(Call("gone", 10, 2));
  RunPosted();
  EXPECT_TRUE(recorded_.empty());
  EXPECT_TRUE(health_.Problems().empty());
}

TEST_F(CallRecorderTest, ABreachIsCommittedAndHandedToTheOwner) {
  const store::InstanceRow a = Running("a");
  {
    std::ofstream out(a.home + "/config.toml");
    out << "[budget.tokens]\ncumulative = 20\n";
  }
  recorder_->Queue(Call("a", 15, 10));
  RunPosted();
  ASSERT_EQ(breach_.runs.size(), 1u);
  EXPECT_EQ(breach_.runs[0], (std::pair<std::string, int64_t>{"a", 1}));
  ASSERT_EQ(breach_.breaches.size(), 1u);
  EXPECT_EQ(breach_.breaches[0].scope, budget::Scope::kCumulative);
  EXPECT_EQ(breach_.breaches[0].observed, 25);
  EXPECT_EQ(breach_.limits.action, budget::Action::kPause);  // the default
}

TEST_F(CallRecorderTest, RefusedCommitsAreKeptAndRetriedWithBackoffUntilRecorded) {
  const store::InstanceRow a = Running("a");
  testing::SetStoreFault(true);
  recorder_->Queue(Call("a", 10, 2));
  RunPosted();
  EXPECT_EQ(Totals(a).run_input, 0u);
  ASSERT_EQ(health_.Problems().size(), 1u);
  EXPECT_NE(health_.Problems()[0].find("1 metered call(s) not recorded yet"), std::string::npos)
      << health_.Problems()[0];
  EXPECT_NE(health_.Problems()[0].find("retrying every 100 ms"), std::string::npos);
  recorder_->Queue(Call("a", 1, 1));  // a retry is due: no extra wake-up
  EXPECT_EQ(RunPosted(), 0u);
  clock_.Advance(std::chrono::milliseconds(100));
  EXPECT_NE(health_.Problems()[0].find("2 metered call(s) not recorded yet"), std::string::npos);
  EXPECT_NE(health_.Problems()[0].find("retrying every 200 ms"), std::string::npos)
      << health_.Problems()[0];
  testing::SetStoreFault(false);
  clock_.Advance(std::chrono::milliseconds(199));
  EXPECT_EQ(Totals(a).run_input, 0u);
  clock_.Advance(std::chrono::milliseconds(1));
  EXPECT_EQ(Totals(a).run_input, 11u);
  EXPECT_TRUE(health_.Problems().empty());
  recorder_->Queue(Call("a", 1, 1));  // back to one wake-up per batch
  EXPECT_EQ(RunPosted(), 1u);
  EXPECT_EQ(Totals(a).run_input, 12u);
}

TEST_F(CallRecorderTest, TheRetryQueueIsBoundedAndDropsTheOldestCountingThem) {
  Build(3);
  const store::InstanceRow a = Running("a");
  testing::SetStoreFault(true);
  for (uint64_t input = 1; input <= 5; ++input) {
    recorder_->Queue(Call("a", input, 0));
  }
  RunPosted();
  EXPECT_EQ(recorder_->dropped(), 2u);
  ASSERT_EQ(health_.Problems().size(), 1u);
  EXPECT_NE(health_.Problems()[0].find("3 metered call(s) not recorded yet"), std::string::npos);
  EXPECT_NE(health_.Problems()[0].find("(2 dropped beyond the bound of 3)"), std::string::npos)
      << health_.Problems()[0];
  testing::SetStoreFault(false);
  clock_.Advance(std::chrono::milliseconds(100));
  EXPECT_EQ(Totals(a).run_input, 3u + 4u + 5u);  // the newest three
}

}  // namespace
}  // namespace ktesio::daemon::engine
