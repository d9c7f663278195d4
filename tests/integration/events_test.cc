// The event stream: replay from a cursor, live delivery in commit order, instance filters, and
// persistence across a daemon restart (no gap, no duplicate).

#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

std::vector<Json> Lines(const std::string& ndjson) {
  std::vector<Json> out;
  std::istringstream in(ndjson);
  std::string line;
  while (std::getline(in, line)) {
    std::optional<Json> doc = ParseJson(line);
    EXPECT_TRUE(doc.has_value()) << line;
    if (doc.has_value()) {
      out.push_back(*doc);
    }
  }
  return out;
}

class EventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
    std::string dir = daemon_.dir() + "/m";
    std::filesystem::create_directories(dir);
    WriteFileOrDie(dir + "/adapter.toml",
                   absl::StrCat("contract_version = \"1.0.0\"\n[adapter]\nkind = \"ev\"\n",
                                "[lifecycle.start]\nexec = \"", ProbePath(),
                                "\"\nargs = [\"--heartbeat-ms\", \"60000\"]\n",
                                "[capabilities.pause]\nlinux = \"guaranteed\"\n",
                                "[metering]\nsource = \"self-reported\"\n"));
    ASSERT_EQ(daemon_.Ctl({"agent", "register", "a", "--manifest", dir}).exit_code, 0);
    ASSERT_EQ(daemon_.Ctl({"agent", "register", "b", "--manifest", dir}).exit_code, 0);
  }

  // Reads the replay from `since` with a short deadline (the stream stays open for live events).
  std::vector<Json> Replay(const std::string& since, const std::string& instance = "",
                           const std::vector<std::string>& selection = {}) {
    std::vector<std::string> args = {"events", "--since", since, "--json"};
    if (!instance.empty()) {
      args.push_back("--instance");
      args.push_back(instance);
    }
    args.insert(args.end(), selection.begin(), selection.end());
    RunOptions options;
    options.timeout = std::chrono::milliseconds(1500);
    return Lines(daemon_.Ctl(args, options).out);
  }

  DaemonHarness daemon_;
};

// Cursors are signed 64-bit: a larger --since is a usage error, not a replay from -1.
TEST_F(EventsTest, ACursorBeyondTheRangeIsRefused) {
  RunResult r = daemon_.Ctl({"events", "--since", "18446744073709551615"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("from 0 to 9223372036854775807"), std::string::npos) << r.err;
  EXPECT_EQ(daemon_.Ctl({"events", "--since", "-1"}).exit_code, 2);
}

TEST_F(EventsTest, ReplayIsOrderedTypedAndFiltered) {
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "pause", "a"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "b"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
  std::vector<Json> all = Replay("0");
  ASSERT_EQ(all.size(), 7u);
  long long previous = 0;
  for (const Json& event : all) {
    EXPECT_EQ(event["type"].string, "transition");
    EXPECT_EQ(event["schema_version"].Int(), 1);
    EXPECT_GT(event["cursor"].Int(), previous);
    previous = event["cursor"].Int();
    for (const char* key : {"instance", "prior_state", "new_state", "cause", "at"}) {
      EXPECT_NE(event.Find(key), nullptr) << key;
    }
  }
  EXPECT_EQ(all[0]["new_state"].string, "starting");
  EXPECT_EQ(all[2]["new_state"].string, "paused");
  std::vector<Json> only_b = Replay("0", "b");
  ASSERT_EQ(only_b.size(), 2u);
  EXPECT_EQ(only_b[1]["new_state"].string, "running");
  std::vector<Json> after = Replay(std::to_string(all[4]["cursor"].Int()));
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0]["cursor"].Int(), all[5]["cursor"].Int());
  EXPECT_EQ(daemon_.Ctl({"events", "--instance", "nobody"}).exit_code, 3);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "b", "--timeout", "0"}).exit_code, 0);
}

TEST_F(EventsTest, SeveralNamesASelectorOrAll) {
  // events takes the selection every per-instance verb takes: names (operands or a repeated
  // --instance), --selector, --all.
  std::string dir = daemon_.dir() + "/m";
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "c", "--manifest", dir}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "label", "c", "team=x"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a", "b", "c"}).exit_code, 0);
  auto instances = [](const std::vector<Json>& events) {
    std::multiset<std::string> out;
    for (const Json& event : events) {
      out.insert(event["instance"].string);
    }
    return out;
  };
  using Set = std::multiset<std::string>;
  EXPECT_EQ(instances(Replay("0", "", {"a", "c"})), (Set{"a", "a", "c", "c"}));
  EXPECT_EQ(instances(Replay("0", "a", {"--instance", "b"})), (Set{"a", "a", "b", "b"}));
  EXPECT_EQ(instances(Replay("0", "", {"--all"})), (Set{"a", "a", "b", "b", "c", "c"}));
  EXPECT_EQ(instances(Replay("0", "", {"b", "--selector", "team=x"})), (Set{"b", "b", "c", "c"}));
  EXPECT_EQ(daemon_.Ctl({"events", "a", "nobody"}).exit_code, 3);
  EXPECT_EQ(daemon_.Ctl({"events", "a", "../x"}).exit_code, 2);
  EXPECT_EQ(daemon_.Ctl({"events", "a", "--all"}).exit_code, 2);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "--all", "--timeout", "0"}).exit_code, 0);
}

TEST_F(EventsTest, LiveEventsArriveAndSurviveARestart) {
  RunResult live;
  std::thread subscriber([&] {
    RunOptions options;
    options.timeout = std::chrono::milliseconds(4000);
    // Replay-then-live from the start of the log: whether the subscriber attaches before or
    // after the start below (a loaded CI machine decides), it must see both transitions once.
    live = daemon_.Ctl({"events", "--since", "0", "--json"}, options);
  });
  usleep(200 * 1000);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  subscriber.join();
  std::vector<Json> seen = Lines(live.out);
  ASSERT_EQ(seen.size(), 2u) << live.out << live.err;
  EXPECT_EQ(seen[1]["new_state"].string, "running");

  const long long last = seen[1]["cursor"].Int();
  daemon_.Kill();
  ASSERT_TRUE(daemon_.Start());
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
  std::vector<Json> resumed = Replay(std::to_string(last));
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0]["cursor"].Int(), last + 1);  // no gap, no duplicate
  EXPECT_EQ(resumed[1]["new_state"].string, "stopped");
}

}  // namespace
}  // namespace ktesio::testing
