// No store error is ignored: with commits failing (KTESIO_TEST_STORE_FAULT_FILE, a test-only seam
// in the store's transaction commit), mutating commands fail with STORE_ERROR naming what could
// not be recorded and change nothing; an agent that exits meanwhile — an effect that already
// happened — has its exit retried with backoff, shown in `daemon status` and the gRPC health
// service until it is recorded, and only then does its restart policy act.

#include <signal.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon_harness.h"
#include "fake_provider.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

namespace fs = std::filesystem;

TEST(StoreFault, FailedCommitsAreRefusedOrRetriedNeverIgnored) {
  DaemonHarness daemon;
  const std::string fault = daemon.dir() + "/store-fault";
  daemon.set_env({"KTESIO_TEST_STORE_FAULT_FILE=" + fault});
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  ASSERT_EQ(daemon.Ctl({"agent", "register", "a", "--kind", "mock"}).exit_code, 0);
  ASSERT_EQ(
      daemon.Ctl({"agent", "config", "set", "a", "restart.backoff_initial_ms", "10"}).exit_code, 0);
  ASSERT_EQ(daemon.Ctl({"agent", "start", "a"}).exit_code, 0);
  auto show = [&] {
    std::optional<Json> doc = ParseJson(daemon.Ctl({"agent", "show", "a", "--json"}).out);
    return doc.has_value() ? (*doc)["instance"] : Json();
  };
  auto status = [&] {
    std::optional<Json> doc = ParseJson(daemon.Ctl({"daemon", "status", "--json"}).out);
    return doc.has_value() ? *doc : Json();
  };
  const int64_t pid = show()["pid"].Int();
  ASSERT_GT(pid, 0);

  WriteFileOrDie(fault, "");
  // A mutating command fails with the store's error and changes nothing.
  RunResult registered = daemon.Ctl({"agent", "register", "b", "--kind", "mock", "--json"});
  EXPECT_EQ(registered.exit_code, 1);
  EXPECT_NE(registered.out.find("\"reason\":\"STORE_ERROR\""), std::string::npos) << registered.out;
  EXPECT_EQ(daemon.Ctl({"agent", "show", "b"}).exit_code, 3);
  RunResult paused = daemon.Ctl({"agent", "pause", "a"});
  EXPECT_EQ(paused.exit_code, 1);
  EXPECT_NE(paused.err.find("recording 'a' running -> paused failed"), std::string::npos)
      << paused.err;
  EXPECT_EQ(show()["state"].string, "running");

  // The agent dies while nothing can be recorded: the exit is retried, not forgotten.
  ASSERT_EQ(kill(static_cast<pid_t>(pid), SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return status()["degraded"].boolean; })) << daemon.DaemonLog();
  const Json degraded = status();
  ASSERT_EQ(degraded["problems"].array.size(), 1u);
  EXPECT_NE(degraded["problems"].array[0].string.find("of 'a' (failed: crashed{signal 9"),
            std::string::npos)
      << degraded["problems"].array[0].string;
  EXPECT_NE(degraded["problems"].array[0].string.find("is not recorded"), std::string::npos);
  // Commands on it are refused until it is; nothing restarted it meanwhile.
  RunResult stop = daemon.Ctl({"agent", "stop", "a"});
  EXPECT_EQ(stop.exit_code, 1);
  EXPECT_NE(stop.err.find("the last exit of 'a' is not recorded yet"), std::string::npos)
      << stop.err;
  EXPECT_EQ(show()["state"].string, "running") << "memory ran ahead of the store";

  // The store takes writes again: the exit is recorded once, then the restart policy acts.
  fs::remove(fault);
  ASSERT_TRUE(WaitFor([&] {
    const Json instance = show();
    return instance["state"].string == "running" && instance["pid"].Int() != pid;
  })) << daemon.DaemonLog();
  EXPECT_FALSE(status()["degraded"].boolean);
  EXPECT_EQ(show()["restart_count"].Int(), 1);
  RunOptions briefly;
  briefly.timeout = std::chrono::milliseconds(1500);  // `events` follows until killed
  RunResult events = daemon.Ctl({"events", "--since", "0", "--instance", "a"}, briefly);
  size_t crashes = 0;
  for (size_t at = 0; (at = events.out.find("crashed{signal 9", at)) != std::string::npos; ++at) {
    ++crashes;
  }
  EXPECT_EQ(crashes, 1u) << events.out;
  EXPECT_NE(daemon.DaemonLog().find("recorded after"), std::string::npos);
  ASSERT_EQ(daemon.Ctl({"agent", "stop", "a"}).exit_code, 0);
}

// `agent list --json` without each instance's "resources" object: CPU time and memory are sampled
// live from the process tree and move on their own, whatever the store does.
std::string ListWithoutLiveSamples(DaemonHarness& daemon) {
  static const std::regex kResources(R"(,"resources":\{[^{}]*\})");
  return std::regex_replace(daemon.Ctl({"agent", "list", "--json"}).out, kResources, "");
}

// Every kind of mutating command: refused with STORE_ERROR naming what was not recorded, and
// nothing changes — not in the store, not in what the daemon shows.
TEST(StoreFault, EveryMutatingCommandFailsWithTheStoreErrorAndChangesNothing) {
  DaemonHarness daemon;
  const std::string fault = daemon.dir() + "/store-fault";
  daemon.set_env({"KTESIO_TEST_STORE_FAULT_FILE=" + fault});
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  ASSERT_EQ(daemon.Ctl({"agent", "register", "idle", "--kind", "mock"}).exit_code, 0);
  ASSERT_EQ(daemon.Ctl({"agent", "register", "live", "--kind", "mock"}).exit_code, 0);
  ASSERT_EQ(daemon.Ctl({"agent", "start", "live"}).exit_code, 0);
  const std::string before = ListWithoutLiveSamples(daemon);
  ASSERT_NE(before.find("\"pid\""), std::string::npos) << before;
  WriteFileOrDie(fault, "");
  for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
           {"agent", "register", "new", "--kind", "mock"},
           {"agent", "start", "idle"},
           {"agent", "stop", "live"},
           {"agent", "restart", "live"},
           {"agent", "pause", "live"},
           {"agent", "remove", "idle"},
       }) {
    std::vector<std::string> argv = command;
    argv.push_back("--json");
    RunResult r = daemon.Ctl(argv);
    EXPECT_EQ(r.exit_code, 1) << absl::StrJoin(command, " ") << ": " << r.out << r.err;
    EXPECT_NE(r.out.find("\"reason\":\"STORE_ERROR\""), std::string::npos)
        << absl::StrJoin(command, " ") << ": " << r.out;
  }
  fs::remove(fault);
  const std::string after = ListWithoutLiveSamples(daemon);
  EXPECT_EQ(after.find("resources"), std::string::npos) << after;
  EXPECT_EQ(after, before) << "a refused command changed something";
  ASSERT_EQ(daemon.Ctl({"agent", "stop", "live"}).exit_code, 0);
}

TEST(StoreFault, AnUnreadableSnapshotIsAReportedErrorNotADefault) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  ASSERT_EQ(daemon.Ctl({"agent", "register", "a", "--kind", "mock"}).exit_code, 0);
  ASSERT_EQ(daemon.Ctl({"agent", "start", "a"}).exit_code, 0);
  ASSERT_EQ(daemon.Stop(), 0);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((daemon.state_dir() + "/state.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE instances SET snapshot = X'FFFFFFFF' WHERE name = 'a'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  RunResult pause = daemon.Ctl({"agent", "pause", "a"});
  EXPECT_EQ(pause.exit_code, 1);
  EXPECT_NE(pause.err.find("the registration snapshot of 'a' in state.db is unreadable"),
            std::string::npos)
      << pause.err;
  // Stopping needs no adapter: it still works, the plain way.
  EXPECT_EQ(daemon.Ctl({"agent", "stop", "a", "--timeout", "2"}).exit_code, 0);
  EXPECT_NE(daemon.DaemonLog().find("stopping with SIGTERM"), std::string::npos);
}

TEST(StoreFault, UsageLinesTheStoreRefusesAreRetriedWithoutNewOutput) {
  DaemonHarness daemon;
  const std::string fault = daemon.dir() + "/store-fault";
  daemon.set_env({"KTESIO_TEST_STORE_FAULT_FILE=" + fault});
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  const std::string dir = daemon.dir() + "/m";
  fs::create_directories(dir);
  WriteFileOrDie(dir + "/adapter.toml",
                 absl::StrCat("contract_version = \"1.0.0\"\n[adapter]\nkind = \"usage\"\n",
                              "[lifecycle.start]\nexec = \"", ProbePath(), "\"\n",
                              "args = [\"--heartbeat-ms\", \"60000\"]\n",
                              "[capabilities.pause]\nlinux = \"guaranteed\"\n",
                              "[capabilities.interaction]\nlinux = \"guaranteed\"\n",
                              "[metering]\nsource = \"self-reported\"\n"));
  ASSERT_EQ(daemon.Ctl({"agent", "register", "u", "--manifest", dir}).exit_code, 0);
  ASSERT_EQ(daemon.Ctl({"agent", "start", "u"}).exit_code, 0);
  auto input_tokens = [&] {
    std::optional<Json> doc = ParseJson(daemon.Ctl({"agent", "usage", "u", "--json"}).out);
    return doc.has_value() ? (*doc)["usage"]["cumulative_input_tokens"].Int() : -1;
  };
  WriteFileOrDie(fault, "");
  // The agent's whole output while the store refuses writes; nothing more comes after it.
  std::string usage_lines;
  for (int i = 0; i < 5; ++i) {
    usage_lines += absl::StrCat("KTESIO_USAGE {\"sequence\":", i,
                                ",\"input_tokens\":7,\"output_tokens\":1}\n");
  }
  const std::string usage_file = daemon.state_dir() + "/agents/u/run/usage-1.log";
  {
    // The probe has no stdin-to-usage mode: write as the shim does (the usage copy).
    std::ofstream out(usage_file, std::ios::app);
    out << usage_lines;
  }
  std::optional<Json> status;
  ASSERT_TRUE(WaitFor([&] {
    status = ParseJson(daemon.Ctl({"daemon", "status", "--json"}).out);
    return status.has_value() && (*status)["degraded"].boolean;
  })) << daemon.DaemonLog();
  EXPECT_NE((*status)["problems"].array[0].string.find("usage lines of run 1 of 'u' are not "
                                                       "recorded yet"),
            std::string::npos)
      << (*status)["problems"].array[0].string;
  EXPECT_EQ(input_tokens(), 0);
  fs::remove(fault);
  EXPECT_TRUE(WaitFor([&] { return input_tokens() == 35; })) << daemon.DaemonLog();
  ASSERT_EQ(daemon.Ctl({"agent", "stop", "u", "--timeout", "0"}).exit_code, 0);
}

TEST(StoreFault, MeteredCallsTheStoreRefusesAreKeptAndRecordedLater) {
  TempDir provider_dir;
  FakeProvider provider(provider_dir.path());
  ASSERT_TRUE(provider.ok());
  DaemonHarness daemon;
  const std::string fault = daemon.dir() + "/store-fault";
  daemon.set_env({"KTESIO_TEST_STORE_FAULT_FILE=" + fault});
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  const std::string dir = daemon.dir() + "/m";
  fs::create_directories(dir);
  WriteFileOrDie(
      dir + "/adapter.toml",
      absl::StrCat("contract_version = \"1.0.0\"\n[adapter]\nkind = \"metered\"\n",
                   "[lifecycle.start]\nexec = \"/usr/bin/python3\"\nargs = [\"-u\", \"",
                   KTESIO_METERED_AGENT, "\"]\n", "env = { HTTP_PROXY = \"http://127.0.0.1:9\" }\n",
                   "[capabilities.interaction]\nlinux = \"guaranteed\"\n",
                   "[metering]\nsource = \"engine-observed\"\n",
                   "[config.\"metering.base_url\"]\nenv = \"OPENAI_BASE_URL\"\n"));
  ASSERT_EQ(daemon.Ctl({"agent", "register", "e", "--manifest", dir}).exit_code, 0);
  ASSERT_EQ(daemon
                .Ctl({"agent", "config", "set", "e", "metering.upstream_base_url",
                      provider.url() + "/v1"})
                .exit_code,
            0);
  ASSERT_EQ(daemon.Ctl({"agent", "start", "e"}).exit_code, 0);
  auto input_tokens = [&] {
    std::optional<Json> doc = ParseJson(daemon.Ctl({"agent", "usage", "e", "--json"}).out);
    return doc.has_value() ? (*doc)["usage"]["cumulative_input_tokens"].Int() : -1;
  };
  auto status = [&] {
    std::optional<Json> doc = ParseJson(daemon.Ctl({"daemon", "status", "--json"}).out);
    return doc.has_value() ? *doc : Json();
  };

  WriteFileOrDie(fault, "");
  ASSERT_EQ(daemon.Ctl({"agent", "send", "e", "chat"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] {
    const Json s = status();
    return s["degraded"].boolean && s["problems"].array[0].string.find(
                                        "metered call(s) not recorded yet") != std::string::npos;
  })) << daemon.DaemonLog();
  EXPECT_EQ(input_tokens(), 0);

  fs::remove(fault);
  ASSERT_TRUE(WaitFor([&] { return input_tokens() > 0; })) << daemon.DaemonLog();
  ASSERT_EQ(provider.Calls().size(), 1u);
  EXPECT_EQ(static_cast<uint64_t>(input_tokens()), provider.Calls()[0].input);
  EXPECT_TRUE(WaitFor([&] { return !status()["degraded"].boolean; }));
  ASSERT_EQ(daemon.Ctl({"agent", "stop", "e", "--timeout", "0"}).exit_code, 0);
}

}  // namespace
}  // namespace ktesio::testing
