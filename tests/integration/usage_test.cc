// Self-reported metering: KTESIO_USAGE lines become ledger rows exactly once — replays are
// recognized, malformed lines are diagnostics, and a daemon SIGKILLed mid-burst loses nothing
// and counts nothing twice.

#include <signal.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

class UsageTestBase : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog(); }

  void Register(const std::string& name, const std::string& args) {
    const std::string dir = WriteProbeManifest(daemon_.dir() + "/m-" + name, "usage", args);
    ASSERT_EQ(daemon_.Ctl({"agent", "register", name, "--manifest", dir}).exit_code, 0);
  }

  std::string State(const std::string& name) {
    std::optional<Json> doc = ParseJson(daemon_.Ctl({"agent", "show", name, "--json"}).out);
    return doc.has_value() ? (*doc)["instance"]["state"].string : "";
  }

  Json Usage(const std::string& name) {
    std::optional<Json> doc = ParseJson(daemon_.Ctl({"agent", "usage", name, "--json"}).out);
    return doc.has_value() ? (*doc)["usage"] : Json();
  }

  DaemonHarness daemon_;
};

class UsageTest : public UsageTestBase {};

TEST_F(UsageTest, LedgerEqualsTheBatchesReplaysAndMalformedIgnored) {
  Register("u",
           "--usage-lines 50 --usage-input 10 --usage-output 20 --usage-replay "
           "--usage-malformed --heartbeat-ms 60000");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "u"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return Usage("u")["cumulative_input_tokens"].Int() == 500; }))
      << daemon_.Ctl({"agent", "usage", "u", "--json"}).out;
  Json usage = Usage("u");
  EXPECT_EQ(usage["cumulative_output_tokens"].Int(), 1000);
  EXPECT_EQ(usage["current_run_input_tokens"].Int(), 500);
  EXPECT_EQ(usage["current_run_output_tokens"].Int(), 1000);
  EXPECT_TRUE(usage["cumulative_input_tokens"].IsInteger());
  EXPECT_EQ(usage["unknown_usage_calls"].Int(), 0);
  EXPECT_EQ(usage.Find("cumulative_dollars"), nullptr);  // no Rate, no fabricated dollars
  ASSERT_TRUE(WaitFor([&] {
    return daemon_.Ctl({"agent", "logs", "u", "--stream", "engine"})
               .out.find("malformed KTESIO_USAGE line ignored") != std::string::npos;
  }));
  // Show and list carry the same numbers; the Fleet totals sum them.
  std::optional<Json> list = ParseJson(daemon_.Ctl({"agent", "list", "--json"}).out);
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ((*list)["totals"]["total_input_tokens"].Int(), 500);
  EXPECT_EQ((*list)["instances"].array[0]["usage"]["cumulative_output_tokens"].Int(), 1000);
  std::optional<Json> fleet = ParseJson(daemon_.Ctl({"agent", "usage", "--json"}).out);
  ASSERT_TRUE(fleet.has_value());
  EXPECT_EQ(fleet->Keys(), (std::vector<std::string>{"schema_version", "totals"}));
  EXPECT_EQ((*fleet)["totals"]["total_output_tokens"].Int(), 1000);
  // One usage_update event per accepted line, none for the replay.
  RunOptions briefly;
  briefly.timeout = std::chrono::milliseconds(1500);
  RunResult events = daemon_.Ctl({"events", "--since", "0", "--json"}, briefly);
  size_t updates = 0;
  for (size_t at = 0; (at = events.out.find("\"type\":\"usage_update\"", at)) != std::string::npos;
       ++at) {
    ++updates;
  }
  EXPECT_EQ(updates, 50u);
  // A new run starts from zero; the cumulative view keeps counting.
  ASSERT_EQ(daemon_.Ctl({"agent", "restart", "u", "--timeout", "0"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return Usage("u")["cumulative_input_tokens"].Int() == 1000; }));
  EXPECT_EQ(Usage("u")["current_run_input_tokens"].Int(), 500);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "u", "--timeout", "0"}).exit_code, 0);
}

TEST_F(UsageTest, ExactlyOnceAcrossADaemonKilledMidBurst) {
  Register("burst", "--usage-lines 100000 --usage-input 1 --usage-output 2 --heartbeat-ms 60000");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "burst"}).exit_code, 0);
  // Kill the daemon while the ledger is still filling (or, on a fast machine, just after).
  WaitFor([&] { return Usage("burst")["cumulative_input_tokens"].Int() > 0; });
  daemon_.Kill();
  ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
  ASSERT_TRUE(WaitFor([&] { return Usage("burst")["cumulative_input_tokens"].Int() >= 100000; },
                      std::chrono::milliseconds(60000)));
  Json usage = Usage("burst");
  EXPECT_EQ(usage["cumulative_input_tokens"].Int(), 100000);
  EXPECT_EQ(usage["cumulative_output_tokens"].Int(), 200000);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "burst", "--timeout", "0"}).exit_code, 0);
  EXPECT_EQ(Usage("burst")["cumulative_input_tokens"].Int(), 100000);
}

// A crash the shim relaunches in place (docs/shim.md) is a new run: its usage lines go to the new
// run's copy, counted once, whether the daemon is up or was down during the relaunch.
TEST_F(UsageTest, ARunRelaunchedByItsShimIsMeteredAsANewRunExactlyOnce) {
  Register("r", "--usage-lines 50 --usage-input 10 --usage-output 20 --heartbeat-ms 60000");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "r"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return Usage("r")["cumulative_input_tokens"].Int() == 500; }));
  const std::string run_dir = daemon_.state_dir() + "/agents/r/run";
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(run_dir + "/respawn"); }));
  const std::string shim = ReadFileOrEmpty(run_dir + "/shim.pid");
  auto agent_pid = [&] { return std::atoi(ReadFileOrEmpty(run_dir + "/agent.pid").c_str()); };
  const pid_t first = agent_pid();
  ASSERT_GT(first, 1);
  ASSERT_EQ(kill(first, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] {
    Json usage = Usage("r");
    return usage["cumulative_input_tokens"].Int() == 1000 &&
           usage["current_run_input_tokens"].Int() == 500 && State("r") == "running";
  })) << daemon_.Ctl({"agent", "usage", "r", "--json"}).out;
  EXPECT_EQ(ReadFileOrEmpty(run_dir + "/shim.pid"), shim) << "restarted through a new shim";
  EXPECT_NE(agent_pid(), first);

  // The daemon is down when the next crash comes (a fresh streak, so it is covered again once
  // the relaunched run outlives reset_after_ms: shortened here to keep the test brief).
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "r", "restart.reset_after_ms", "1"}).exit_code,
            0);
  // The edit took the grant back; this crash is restarted by the daemon, which grants anew.
  const pid_t second = agent_pid();
  ASSERT_EQ(kill(second, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] {
    return Usage("r")["cumulative_input_tokens"].Int() == 1500 && State("r") == "running" &&
           std::filesystem::exists(run_dir + "/respawn");
  }));
  EXPECT_NE(ReadFileOrEmpty(run_dir + "/shim.pid"), shim) << "the config edit was ignored";
  daemon_.Kill();
  const pid_t third = agent_pid();
  ASSERT_EQ(kill(third, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(run_dir + "/respawned"); }));
  ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
  ASSERT_TRUE(WaitFor([&] {
    Json usage = Usage("r");
    return usage["cumulative_input_tokens"].Int() == 2000 &&
           usage["current_run_input_tokens"].Int() == 500 && State("r") == "running";
  })) << daemon_.Ctl({"agent", "usage", "r", "--json"}).out;
  std::optional<Json> shown = ParseJson(daemon_.Ctl({"agent", "show", "r", "--json"}).out);
  ASSERT_TRUE(shown.has_value());
  EXPECT_EQ((*shown)["instance"]["restart_count"].Int(), 3);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "r", "--timeout", "0"}).exit_code, 0);
  EXPECT_EQ(Usage("r")["cumulative_output_tokens"].Int(), 4000);
}

TEST_F(UsageTest, UsageOfUnknownInstanceIsNotFound) {
  EXPECT_EQ(daemon_.Ctl({"agent", "usage", "ghost"}).exit_code, 3);
}

}  // namespace
}  // namespace ktesio::testing

namespace ktesio::testing {
namespace {

class BudgetTest : public UsageTestBase {};

TEST_F(BudgetTest, TokenBudgetPausesAGuaranteedAgent) {
  Register("b",
           "--usage-lines 40 --usage-input 10 --usage-output 10 --usage-interval-ms 40 "
           "--heartbeat-ms 20 --heartbeat-file " +
               daemon_.dir() + "/beat");
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "b", "budget.tokens.per_run", "100"}).exit_code,
            0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "b"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return State("b") == "paused"; }));
  std::optional<Json> show = ParseJson(daemon_.Ctl({"agent", "show", "b", "--json"}).out);
  ASSERT_TRUE(show.has_value());
  const Json& budget = (*show)["instance"]["budget"];
  EXPECT_EQ(budget["per_run_limit"].Int(), 100);
  EXPECT_EQ(budget["per_run_remaining"].Int(), 0);
  EXPECT_EQ(budget["breach_action"].string, "pause");
  const long long frozen_at = Usage("b")["current_run_input_tokens"].Int();
  EXPECT_GE(frozen_at, 50);
  // Frozen for real: neither heartbeats nor usage advance.
  const std::string beat = ReadFileOrEmpty(daemon_.dir() + "/beat");
  usleep(300 * 1000);
  EXPECT_EQ(ReadFileOrEmpty(daemon_.dir() + "/beat"), beat);
  EXPECT_EQ(Usage("b")["current_run_input_tokens"].Int(), frozen_at);
  RunOptions briefly;
  briefly.timeout = std::chrono::milliseconds(1500);
  RunResult events = daemon_.Ctl({"events", "--since", "0", "--json"}, briefly);
  EXPECT_NE(events.out.find("\"type\":\"budget_breach\""), std::string::npos);
  EXPECT_NE(events.out.find("\"dimension\":\"tokens\""), std::string::npos);
  EXPECT_NE(events.out.find("\"cause\":\"budget-exceeded{scope=run,dimension=tokens,limit=100"),
            std::string::npos)
      << events.out;
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "b", "--timeout", "0"}).exit_code, 0);
}

TEST_F(BudgetTest, StopActionAndDollarCapWithARate) {
  Register("d",
           "--usage-lines 40 --usage-input 10 --usage-output 10 --usage-interval-ms 40 "
           "--heartbeat-ms 1000");
  // $1 per token each way: every event costs $20.
  for (auto [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"cost.rate.input", "1000000"},
                                                        {"cost.rate.output", "1000000"},
                                                        {"budget.dollars.per_run", "50"},
                                                        {"budget.breach_action", "stop"}}) {
    ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "d", key, value}).exit_code, 0) << key;
  }
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "d"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return State("d") == "stopped"; }, std::chrono::milliseconds(40000)));
  Json usage = Usage("d");
  EXPECT_EQ(usage["estimate_label"].string, "estimated");
  EXPECT_GE(usage["cumulative_dollars"].Int(), 60000000);
  EXPECT_EQ(
      usage["cumulative_dollars"].Int(),
      (usage["cumulative_input_tokens"].Int() + usage["cumulative_output_tokens"].Int()) * 1000000);
  std::optional<Json> show = ParseJson(daemon_.Ctl({"agent", "show", "d", "--json"}).out);
  EXPECT_EQ((*show)["instance"]["budget"]["per_run_cost_cap"].Int(), 50000000);
  EXPECT_NE(daemon_.Ctl({"agent", "show", "d"}).out.find("(estimated)"), std::string::npos);
}

TEST_F(BudgetTest, WarnOnlyRecordsAndNoRateMeansNoDollars) {
  Register("w", "--usage-lines 10 --usage-input 10 --usage-output 10 --heartbeat-ms 1000");
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "w", "budget.tokens.per_run", "50"}).exit_code,
            0);
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "w", "budget.breach_action", "warn"}).exit_code,
            0);
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "w", "budget.dollars.per_run", "1"}).exit_code,
            0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "w"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return Usage("w")["cumulative_input_tokens"].Int() == 100; }));
  EXPECT_EQ(State("w"), "running");
  EXPECT_EQ(Usage("w").Find("cumulative_dollars"), nullptr);  // never a fabricated $0.00
  std::optional<Json> list = ParseJson(daemon_.Ctl({"agent", "list", "--json"}).out);
  EXPECT_EQ((*list)["totals"].Find("total_dollars"), nullptr);
  EXPECT_EQ((*list)["totals"]["unpriced_count"].Int(), 1);
  RunOptions briefly;
  briefly.timeout = std::chrono::milliseconds(1500);
  RunResult events = daemon_.Ctl({"events", "--since", "0", "--json"}, briefly);
  size_t breaches = 0;
  for (size_t at = 0; (at = events.out.find("budget_breach", at)) != std::string::npos; ++at) {
    ++breaches;
  }
  EXPECT_EQ(breaches, 1u);  // once per Run; the dollar cap is inert without a Rate
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "w", "--timeout", "0"}).exit_code, 0);
}

}  // namespace
}  // namespace ktesio::testing
