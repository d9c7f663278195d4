// Captured output through the API: retained lines, filters, follow, rotation, and no loss.

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

std::string Manifest(const std::string& args) {
  std::string quoted;
  std::istringstream in(args);
  std::string word;
  while (in >> word) {
    quoted += (quoted.empty() ? "\"" : ", \"") + word + "\"";
  }
  return absl::StrCat("contract_version = \"1.0.0\"\n[adapter]\nkind = \"logs\"\n",
                      "[lifecycle.start]\nexec = \"", ProbePath(), "\"\nargs = [", quoted, "]\n",
                      "[capabilities.pause]\nlinux = \"guaranteed\"\n",
                      "[capabilities.interaction]\nlinux = \"guaranteed\"\n",
                      "[metering]\nsource = \"self-reported\"\n");
}

class LogsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog(); }
  void Register(const std::string& name, const std::string& args) {
    std::string dir = daemon_.dir() + "/m-" + name;
    std::filesystem::create_directories(dir);
    WriteFileOrDie(dir + "/adapter.toml", Manifest(args));
    ASSERT_EQ(daemon_.Ctl({"agent", "register", name, "--manifest", dir}).exit_code, 0);
  }
  DaemonHarness daemon_;
};

TEST_F(LogsTest, RetainedLinesFiltersAndJson) {
  Register("l", "--lines 50 --stderr-lines 5 --heartbeat-ms 60000");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "l"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] {
    return daemon_.Ctl({"agent", "logs", "l", "--stream", "out"}).out.find("line 49") !=
           std::string::npos;
  }));
  RunResult tail = daemon_.Ctl({"agent", "logs", "l", "--tail", "3", "--stream", "out"});
  EXPECT_EQ(std::count(tail.out.begin(), tail.out.end(), '\n'), 3) << tail.out;
  RunResult err = daemon_.Ctl({"agent", "logs", "l", "--stream", "err"});
  EXPECT_NE(err.out.find("agent-err err 4"), std::string::npos) << err.out;
  EXPECT_EQ(err.out.find("agent-out"), std::string::npos);
  RunResult engine = daemon_.Ctl({"agent", "logs", "l", "--stream", "engine"});
  EXPECT_NE(engine.out.find("engine transition starting -> running"), std::string::npos);
  RunResult json = daemon_.Ctl({"agent", "logs", "l", "--tail", "2", "--json"});
  std::istringstream lines(json.out);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    std::optional<Json> doc = ParseJson(line);
    ASSERT_TRUE(doc.has_value()) << line;
    EXPECT_EQ(doc->Keys(),
              (std::vector<std::string>{"schema_version", "instance", "stream", "at", "text"}));
    EXPECT_EQ((*doc)["instance"].string, "l");
    ++count;
  }
  EXPECT_EQ(count, 2);
  EXPECT_EQ(daemon_.Ctl({"agent", "logs", "l", "--stream", "bogus"}).exit_code, 2);
  EXPECT_EQ(daemon_.Ctl({"agent", "logs", "nobody"}).exit_code, 3);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "l", "--timeout", "0"}).exit_code, 0);
}

TEST_F(LogsTest, FollowStreamsLiveLinesAndEndsWhenAgentLeavesRunning) {
  Register("f", "--echo");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "f"}).exit_code, 0);
  RunResult follow;
  std::thread follower([&] { follow = daemon_.Ctl({"agent", "logs", "f", "-f"}); });
  // The follower is attached once its retained lines are out; then feed live input.
  ASSERT_TRUE(WaitFor([&] { return daemon_.DaemonLog().find("rpc=") != std::string::npos; }));
  usleep(300 * 1000);
  ASSERT_EQ(daemon_.Ctl({"agent", "send", "f", "live one"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] {
    return daemon_.Ctl({"agent", "logs", "f"}).out.find("echo: live one") != std::string::npos;
  }));
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "f", "--timeout", "0"}).exit_code, 0);
  follower.join();
  EXPECT_EQ(follow.exit_code, 0) << follow.err;
  EXPECT_NE(follow.out.find("echo: live one"), std::string::npos) << follow.out;
  EXPECT_NE(follow.err.find("left running"), std::string::npos) << follow.err;
}

TEST_F(LogsTest, TailZeroShowsNothingRetainedAndFollowsOnlyNewLines) {
  Register("t", "--echo");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "t"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "send", "t", "old line"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] {
    return daemon_.Ctl({"agent", "logs", "t"}).out.find("echo: old line") != std::string::npos;
  }));
  RunResult none = daemon_.Ctl({"agent", "logs", "t", "--tail", "0"});
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.out, "");
  RunResult follow;
  std::thread follower([&] { follow = daemon_.Ctl({"agent", "logs", "t", "-f", "--tail", "0"}); });
  ASSERT_TRUE(
      WaitFor([&] { return daemon_.DaemonLog().find("rpc=SendInput") != std::string::npos; }));
  usleep(500 * 1000);  // the follower attaches
  ASSERT_EQ(daemon_.Ctl({"agent", "send", "t", "new line"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] {
    return daemon_.Ctl({"agent", "logs", "t"}).out.find("echo: new line") != std::string::npos;
  }));
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "t", "--timeout", "0"}).exit_code, 0);
  follower.join();
  EXPECT_EQ(follow.exit_code, 0) << follow.err;
  EXPECT_NE(follow.out.find("echo: new line"), std::string::npos) << follow.out;
  EXPECT_EQ(follow.out.find("old line"), std::string::npos) << follow.out;
}

TEST_F(LogsTest, RotationKeepsGenerationsAndLosesNoRetainedLine) {
  Register("r", "--lines 20000 --line-bytes 64 --heartbeat-ms 60000");
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "r", "logs.max_bytes", "65536"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "r", "logs.keep", "2"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "r"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] {
    return daemon_.Ctl({"agent", "logs", "r", "--tail", "3", "--stream", "out"})
               .out.find("line 19999") != std::string::npos;
  }));
  std::string log_dir = daemon_.state_dir() + "/agents/r/logs";
  int segments = 0;
  uintmax_t total = 0;
  for (const auto& entry : std::filesystem::directory_iterator(log_dir)) {
    ++segments;
    total += entry.file_size();
  }
  EXPECT_EQ(segments, 3);  // the current segment plus logs.keep rotated ones
  EXPECT_LE(total, 4u * 65536u);
  // What is retained is contiguous: numbered lines without a gap.
  RunResult out = daemon_.Ctl({"agent", "logs", "r", "--stream", "out"});
  std::istringstream in(out.out);
  std::string line;
  long previous = -1;
  while (std::getline(in, line)) {
    size_t at = line.find("agent-out line ");
    if (at == std::string::npos) {
      continue;
    }
    long number = std::stol(line.substr(at + 15));
    if (previous >= 0) {
      EXPECT_EQ(number, previous + 1);
    }
    previous = number;
  }
  EXPECT_EQ(previous, 19999);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "r", "--timeout", "0"}).exit_code, 0);
}

TEST_F(LogsTest, RetainedLogsOverTheDefaultMessageSizeAndNonUtf8Bytes) {
  // ~9 MiB retained (over gRPC's default 4 MiB message), and one line that is not UTF-8: both
  // must read back whole, with the bad bytes shown as U+FFFD and kept raw on disk.
  Register("big", "--lines 150000 --line-bytes 60 --bulk --heartbeat-ms 60000");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "big"}).exit_code, 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        RunResult tail = daemon_.Ctl({"agent", "logs", "big", "--stream", "out", "--tail", "3"});
        return tail.out.find("line 149999") != std::string::npos;
      },
      std::chrono::milliseconds(60000)));
  RunResult all = daemon_.Ctl({"agent", "logs", "big", "--stream", "out"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_GT(all.out.size(), 8u << 20);
  EXPECT_NE(all.out.find("line 0 "), std::string::npos);
  EXPECT_NE(all.out.find("line 149999"), std::string::npos);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "big", "--timeout", "0"}).exit_code, 0);
  // -f: the retained part arrives first, then the stream ends with the agent.
  RunResult followed = daemon_.Ctl({"agent", "logs", "big", "-f"});
  EXPECT_EQ(followed.exit_code, 0) << followed.err;
  EXPECT_NE(followed.out.find("line 149999"), std::string::npos);

  std::string dir = daemon_.dir() + "/m-bytes";
  std::filesystem::create_directories(dir);
  WriteFileOrDie(dir + "/adapter.toml",
                 "contract_version = \"1.0.0\"\n[adapter]\nkind = \"bytes\"\n"
                 "[lifecycle.start]\nexec = \"/bin/sh\"\n"
                 "args = [\"-c\", \"printf 'bad \\\\377\\\\376 bytes\\\\n'; exec sleep 60\"]\n"
                 "[capabilities.pause]\nlinux = \"guaranteed\"\n"
                 "[metering]\nsource = \"self-reported\"\n");
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "bytes", "--manifest", dir}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "bytes"}).exit_code, 0);
  RunResult bytes;
  ASSERT_TRUE(WaitFor([&] {
    bytes = daemon_.Ctl({"agent", "logs", "bytes", "--json"});
    return bytes.out.find("bad ") != std::string::npos;
  })) << bytes.out
      << bytes.err;
  EXPECT_EQ(bytes.exit_code, 0) << bytes.err;
  EXPECT_NE(bytes.out.find("bad \xef\xbf\xbd\xef\xbf\xbd bytes"), std::string::npos) << bytes.out;
  std::string raw;
  for (const auto& entry :
       std::filesystem::directory_iterator(daemon_.state_dir() + "/agents/bytes/logs")) {
    raw += ReadFileOrEmpty(entry.path());
  }
  EXPECT_NE(raw.find("bad \xff\xfe bytes"), std::string::npos);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "bytes", "--timeout", "0"}).exit_code, 0);
}

TEST_F(LogsTest, BurstLosesNoLine) {
  Register("b", "--lines 200000 --line-bytes 32 --heartbeat-ms 60000");
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "b", "logs.max_bytes", "104857600"}).exit_code,
            0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "b"}).exit_code, 0);
  std::string log_dir = daemon_.state_dir() + "/agents/b/logs";
  auto all = [&] {
    std::string text;
    for (const auto& entry : std::filesystem::directory_iterator(log_dir)) {
      text += ReadFileOrEmpty(entry.path());
    }
    return text;
  };
  ASSERT_TRUE(WaitFor([&] { return all().find("agent-out line 199999") != std::string::npos; },
                      std::chrono::milliseconds(60000)));
  std::string text = all();
  std::set<long> seen;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t at = line.find(" agent-out line ");
    if (at != std::string::npos) {
      seen.insert(std::stol(line.substr(at + 16)));
    }
  }
  EXPECT_EQ(seen.size(), 200000u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 199999);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "b", "--timeout", "0"}).exit_code, 0);
}

}  // namespace
}  // namespace ktesio::testing
