// Budget actions survive a daemon crash: a breach is committed with its pause/stop marked
// pending in the same transaction, and a daemon that dies before acting (a deterministic crash
// point, and a SIGKILL loop under usage load) has the next one take the action at start, before
// it answers. No breach is ever left without its action.

#include <signal.h>
#include <sqlite3.h>

#include <filesystem>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

namespace fs = std::filesystem;

int64_t Scalar(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  int64_t value = -1;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      value = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return value;
}

char ProcessState(int64_t pid) {
  const std::string stat = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

class BudgetCrashTest : public ::testing::Test {
 protected:
  void Register(const std::string& name, const std::string& args, const std::string& action,
                const std::string& per_run) {
    const std::string dir = WriteProbeManifest(daemon_.dir() + "/m-" + name, "usage", args);
    ASSERT_EQ(daemon_.Ctl({"agent", "register", name, "--manifest", dir}).exit_code, 0);
    for (const auto& [key, value] :
         std::vector<std::pair<std::string, std::string>>{{"budget.tokens.per_run", per_run},
                                                          {"budget.breach_action", action},
                                                          {"restart.policy", "never"}}) {
      ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", name, key, value}).exit_code, 0) << key;
    }
  }

  Json Instance(const std::string& name) {
    std::optional<Json> doc = ParseJson(daemon_.Ctl({"agent", "show", name, "--json"}).out);
    return doc.has_value() ? (*doc)["instance"] : Json();
  }

  std::string Db() const { return daemon_.state_dir() + "/state.db"; }

  DaemonHarness daemon_;
};

TEST_F(BudgetCrashTest, ACrashBetweenTheBreachAndItsActionIsActedOnAtTheNextStart) {
  for (const std::string action : {"pause", "stop"}) {
    SCOPED_TRACE(action);
    daemon_.set_env({"KTESIO_TEST_CRASH_POINT=after-breach-commit"});
    ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
    const std::string name = "b-" + action;
    Register(name, "--usage-lines 20 --usage-input 5 --usage-output 5 --usage-interval-ms 120",
             action, "50");
    ASSERT_EQ(daemon_.Ctl({"agent", "start", name}).exit_code, 0);
    // A `show` that fails under load (a sanitizer build beside the kit's tests) yields no
    // document; asking again keeps a pid of 0 from being checked as if it were the agent's.
    int64_t pid = 0;
    ASSERT_TRUE(WaitFor([&] { return (pid = Instance(name)["pid"].Int()) > 0; }))
        << daemon_.DaemonLog();
    // The daemon dies right after committing the breach, before acting on it.
    ASSERT_EQ(daemon_.WaitForExit(std::chrono::seconds(10)), 99) << daemon_.DaemonLog();
    EXPECT_EQ(Scalar(Db(), "SELECT count(*) FROM breaches WHERE pending = 1"), 1);
    EXPECT_NE(ProcessState(pid), 'T') << "the agent was acted on before the crash";

    daemon_.set_env({"KTESIO_TEST_CRASH_POINT"});  // unset
    ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
    // The very first answer already shows the action taken.
    const Json instance = Instance(name);
    const std::string state = instance["state"].string;
    if (action == "pause") {
      EXPECT_EQ(state, "paused");
      EXPECT_EQ(ProcessState(pid), 'T');
    } else {
      EXPECT_TRUE(state == "stopping" || state == "stopped") << state;
      EXPECT_TRUE(WaitFor([&] { return Instance(name)["state"].string == "stopped"; }));
    }
    EXPECT_NE(daemon_.Ctl({"agent", "logs", name}).out.find("acted on after a daemon restart"),
              std::string::npos);
    EXPECT_EQ(Scalar(Db(), "SELECT count(*) FROM breaches WHERE pending = 1"), 0);
    ASSERT_EQ(daemon_.Ctl({"agent", "stop", name, "--timeout", "0"}).exit_code == 0 ||
                  Instance(name)["state"].string == "stopped",
              true);
    ASSERT_EQ(daemon_.Stop(), 0);
  }
}

TEST_F(BudgetCrashTest, SigkillLoopUnderUsageLoadLeavesNoBreachWithoutItsAction) {
  ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
  constexpr int kAgents = 8;
  for (int i = 0; i < kAgents; ++i) {
    Register(absl::StrCat("a", i),
             "--usage-lines 80 --usage-input 5 --usage-output 5 --usage-interval-ms 15 "
             "--heartbeat-ms 60000",
             i % 2 == 0 ? "pause" : "stop", std::to_string(100 + 60 * i));
    ASSERT_EQ(daemon_.Ctl({"agent", "start", absl::StrCat("a", i)}).exit_code, 0);
  }
  std::mt19937 random(42);
  for (int round = 0; round < 12; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(40 + random() % 90));
    daemon_.Kill();
    ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
  }
  // Every agent's 800 tokens cross its limit (100 … 520): once all usage is in, every breach
  // must have been acted on, none pending.
  for (int i = 0; i < kAgents; ++i) {
    const std::string name = absl::StrCat("a", i);
    EXPECT_TRUE(WaitFor(
        [&] {
          const std::string state = Instance(name)["state"].string;
          return state == (i % 2 == 0 ? "paused" : "stopped");
        },
        std::chrono::seconds(20)))
        << name << " is " << Instance(name)["state"].string;
  }
  daemon_.Stop();
  EXPECT_EQ(Scalar(Db(), "SELECT count(*) FROM breaches WHERE pending = 1"), 0);
  EXPECT_GE(Scalar(Db(), "SELECT count(DISTINCT instance_id) FROM breaches"), kAgents);
}

}  // namespace
}  // namespace ktesio::testing
