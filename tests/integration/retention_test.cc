// Retention through the real daemon: with a short policy the event log and the per-call ledger
// are pruned in the background while totals, budgets and breach state stay exactly as they
// were; a replay from a pruned cursor says so; the usage copy gives its ingested bytes back.

#include <sys/stat.h>

#include <filesystem>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "fake_provider.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = daemon_.dir() + "/ktesiod.toml";
    WriteFileOrDie(config_, "retention_interval_secs = 1\n");  // nothing pruned yet
    ASSERT_TRUE(daemon_.Start({"--config", config_})) << daemon_.DaemonLog();
  }

  size_t CountEvents(const std::string& since, std::string* err = nullptr) {
    RunOptions options;
    options.timeout = std::chrono::milliseconds(1500);
    RunResult r = daemon_.Ctl({"events", "--since", since, "--json"}, options);
    if (err != nullptr) {
      *err = r.err;
    }
    std::istringstream lines(r.out);
    size_t n = 0;
    for (std::string line; std::getline(lines, line);) {
      n += line.empty() ? 0 : 1;
    }
    return n;
  }

  std::string Usage(const std::string& name) {
    return daemon_.Ctl({"agent", "usage", name, "--json"}).out;
  }

  std::string Budget(const std::string& name) {
    std::optional<Json> doc = ParseJson(daemon_.Ctl({"agent", "show", name, "--json"}).out);
    if (!doc.has_value()) {
      return "";
    }
    const Json& budget = (*doc)["instance"]["budget"];
    return absl::StrCat(budget["cumulative_limit"].number, "/",
                        budget["cumulative_remaining"].number, "/",
                        (*doc)["instance"]["usage"]["cumulative_input_tokens"].number);
  }

  DaemonHarness daemon_;
  std::string config_;
};

TEST_F(RetentionTest, PruningKeepsTotalsBudgetsAndSaysWhenAReplayHasAGap) {
  const std::string manifest = WriteProbeManifest(daemon_.dir() + "/probe", "probe",
                                                  "--usage-lines 1200 --heartbeat-ms 60000");
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "a", "--manifest", manifest}).exit_code, 0);
  ASSERT_EQ(
      daemon_.Ctl({"agent", "config", "set", "a", "budget.tokens.cumulative", "100000"}).exit_code,
      0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] {
    return Usage("a").find("\"cumulative_input_tokens\":12000") != std::string::npos;
  })) << Usage("a");
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
  const std::string usage_before = Usage("a");
  const std::string budget_before = Budget("a");
  const size_t events_before = CountEvents("0");
  ASSERT_GT(events_before, 1200u);

  // A short policy, applied live on SIGHUP.
  WriteFileOrDie(config_,
                 "retention_interval_secs = 1\nretention_events_max = 20\n"
                 "retention_ledger_secs = 1\n");
  kill(daemon_.pid(), SIGHUP);
  ASSERT_TRUE(WaitFor([&] { return CountEvents("0") <= 21; }, std::chrono::seconds(20)))
      << CountEvents("0");
  EXPECT_EQ(Usage("a"), usage_before) << "totals changed by pruning";
  EXPECT_EQ(Budget("a"), budget_before) << "the budget view changed by pruning";

  std::string err;
  CountEvents("0", &err);
  EXPECT_NE(err.find("were pruned by the retention policy; the replay starts at cursor"),
            std::string::npos)
      << err;
  EXPECT_NE(daemon_.DaemonLog().find("retention: pruned"), std::string::npos);

  // The per-call ledger detail is gone, the totals are not: a new run still adds up.
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  EXPECT_TRUE(WaitFor([&] {
    return Usage("a").find("\"cumulative_input_tokens\":24000") != std::string::npos;
  })) << Usage("a");

  // The ended run's usage copy gave its disk blocks back with its ledger detail; the live
  // run's keeps its ingested bytes (the last 16 MiB stay for restoring an older backup).
  const std::string run_dir = daemon_.state_dir() + "/agents/a/run";
  auto blocks = [&](const std::string& file) {
    struct stat st {};
    return stat((run_dir + "/" + file).c_str(), &st) == 0 ? st.st_blocks : -1;
  };
  EXPECT_TRUE(WaitFor([&] { return blocks("usage-1.log") == 0; })) << blocks("usage-1.log");
  struct stat first {};
  ASSERT_EQ(stat((run_dir + "/usage-1.log").c_str(), &first), 0);
  EXPECT_GT(first.st_size, 64 * 1024) << "the copy keeps its size: offsets stay valid";
  EXPECT_GT(blocks("usage-2.log"), 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);

  // ktesio_events_total counts what retention pruned: a restarted daemon, counting again from
  // its store, never shows less than the events there ever were (no reset for rate()).
  daemon_.Kill();
  ASSERT_TRUE(daemon_.Start({"--config", config_, "--metrics-listen", "127.0.0.1:0"}))
      << daemon_.DaemonLog();
  std::optional<Json> status = ParseJson(daemon_.Ctl({"daemon", "status", "--json"}).out);
  ASSERT_TRUE(status.has_value());
  const std::string address = (*status)["metrics_address"].string;
  const auto port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  HttpResponse metrics = HttpRequest(port, "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.error;
  double total = 0;
  std::istringstream lines(metrics.body);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("ktesio_events_total{")) {
      total += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  EXPECT_GE(total, static_cast<double>(events_before) + 4) << metrics.body;
}

TEST_F(RetentionTest, BadRetentionValuesRefuseTheStart) {
  DaemonHarness other;
  const std::string config = other.dir() + "/bad.toml";
  WriteFileOrDie(config, "retention_events_max = -1\n");
  EXPECT_FALSE(other.Start({"--config", config}));
  EXPECT_NE(other.DaemonLog().find("'retention_events_max' must be an integer from 0"),
            std::string::npos)
      << other.DaemonLog();
  WriteFileOrDie(config, "retention_event_secs = 5\n");
  EXPECT_FALSE(other.Start({"--config", config}));
  EXPECT_NE(other.DaemonLog().find("unknown key 'retention_event_secs'"), std::string::npos)
      << other.DaemonLog();
}

}  // namespace
}  // namespace ktesio::testing
