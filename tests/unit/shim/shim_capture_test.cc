// Runs the real ktesio-shim and checks what it captures: attribution, framing, bursts without
// loss, rotation and retention, and the usage file.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <regex>
#include <string>

#include "ktesio/contract/usage_line.h"
#include "segments.h"
#include "shim_test_util.h"

namespace ktesio::daemon::shim::testing {
namespace {

const std::string kProbe = KTESIO_PROBE_PATH;

// Runs the shim to completion and returns the exit record.
std::string RunToExit(const TempDir& dir, const ShimArgs& args) {
  ShimProcess shim(dir, args);
  std::optional<int> status = shim.Wait();
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  return ReadFile(dir.run_dir() + "/exit").value_or("");
}

// Checks that `records` on `stream` are exactly "<prefix> 0" .. "<prefix> n-1", each once and
// in order (the probe pads each line with " xxx...").
void ExpectNumberedLines(const std::vector<Record>& records, const std::string& stream,
                         const std::string& prefix, int n) {
  int next = 0;
  for (const Record& r : records) {
    if (r.stream != stream || !r.text.starts_with(prefix + " ")) {
      continue;
    }
    std::string number =
        r.text.substr(prefix.size() + 1, r.text.find(' ', prefix.size() + 1) - prefix.size() - 1);
    ASSERT_EQ(number, std::to_string(next)) << "lost, duplicated or reordered line";
    ++next;
  }
  EXPECT_EQ(next, n);
}

TEST(ShimCaptureTest, AttributesStdoutAndStderrWithTimestamps) {
  TempDir dir;
  EXPECT_EQ(RunToExit(dir, {{kProbe, "--quiet", "--lines", "3", "--stderr-lines", "2",
                             "--exit-immediately", "--exit-code", "0"}}),
            "exited 0\n");
  std::vector<Record> records = ParseRecords(ReadLog(dir.log_dir()));
  ASSERT_EQ(records.size(), 5u);
  std::regex rfc3339(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");
  for (const Record& r : records) {
    EXPECT_TRUE(std::regex_match(r.timestamp, rfc3339)) << r.timestamp;
    EXPECT_EQ(r.stream == "agent-out", r.text.starts_with("line ")) << r.text;
    EXPECT_EQ(r.stream == "agent-err", r.text.starts_with("err ")) << r.text;
  }
  ExpectNumberedLines(records, "agent-out", "line", 3);
  ExpectNumberedLines(records, "agent-err", "err", 2);
  struct stat st {};
  ASSERT_EQ(stat((dir.log_dir() + "/output-00000001.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(ShimCaptureTest, FramesLongLinesBinaryBytesAndAnUnterminatedLastLine) {
  TempDir dir;
  std::string script =
      "head -c 40000 /dev/zero | tr '\\0' a; printf '\\n'; printf 'b\\000\\001\\377c\\r\\n';"
      "printf 'no-newline' >&2";
  EXPECT_EQ(RunToExit(dir, {{"/bin/sh", "-c", script}}), "exited 0\n");
  std::vector<Record> records = ParseRecords(ReadLog(dir.log_dir()));
  ASSERT_EQ(records.size(), 5u);
  EXPECT_EQ(records[0].text, std::string(16384, 'a'));
  EXPECT_EQ(records[1].text, std::string(16384, 'a'));
  EXPECT_EQ(records[2].text, std::string(40000 - 2 * 16384, 'a'));
  EXPECT_EQ(records[3].text, std::string("b\0\x01\xff"
                                         "c",
                                         5));
  EXPECT_EQ(records[4].stream, "agent-err");
  EXPECT_EQ(records[4].text, "no-newline");
}

TEST(ShimCaptureTest, CapturesABurstWithoutLoss) {
  TempDir dir;
  constexpr int kLines = 200000;
  EXPECT_EQ(RunToExit(dir, {{kProbe, "--quiet", "--lines", std::to_string(kLines),
                             "--exit-immediately", "--exit-code", "0"}}),
            "exited 0\n");
  std::vector<Record> records = ParseRecords(ReadLog(dir.log_dir()));
  EXPECT_EQ(records.size(), static_cast<std::size_t>(kLines));
  ExpectNumberedLines(records, "agent-out", "line", kLines);
}

TEST(ShimCaptureTest, CapturesABulkBurstOnBothStreamsWithoutLoss) {
  TempDir dir;
  constexpr int kLines = 200000;
  EXPECT_EQ(RunToExit(dir, {{kProbe, "--quiet", "--bulk", "--lines", std::to_string(kLines),
                             "--stderr-lines", std::to_string(kLines), "--exit-immediately",
                             "--exit-code", "0"}}),
            "exited 0\n");
  std::vector<Record> records = ParseRecords(ReadLog(dir.log_dir()));
  EXPECT_EQ(records.size(), static_cast<std::size_t>(2 * kLines));
  ExpectNumberedLines(records, "agent-out", "line", kLines);
  ExpectNumberedLines(records, "agent-err", "err", kLines);
}

// Records wait in the shim for at most a millisecond: the lines of an agent reach the log (and a
// usage line its file) while it runs, with no exit to push them out. The agent goes on writing a
// line every 0.3 s, so the shim is never idle long enough (1 s) to write held records on its way
// to releasing its buffers: only the millisecond deadline can have written them.
TEST(ShimCaptureTest, RecordsReachTheLogWithinTheirDeadlineWhileTheAgentRuns) {
  TempDir dir;
  const std::string usage = dir.File("usage.jsonl");
  ShimProcess shim(dir, {{"/bin/sh", "-c",
                          "echo one; echo two >&2; echo 'KTESIO_USAGE {\"sequence\":0}'; "
                          "while :; do sleep 0.3; echo tick; done"},
                         {"--usage-file", usage}});
  auto texts = [&] {
    std::vector<std::string> found;
    for (const Record& r : ParseRecords(ReadLog(dir.log_dir()))) {
      if (r.text != "tick") {
        found.push_back(r.stream + " " + r.text);
      }
    }
    // Across the two streams the order is the order of the shim's reads.
    std::sort(found.begin(), found.end());
    return found;
  };
  const std::vector<std::string> expected = {
      "agent-err two", "agent-out KTESIO_USAGE {\"sequence\":0}", "agent-out one"};
  ASSERT_TRUE(WaitUntil([&] { return texts() == expected; })) << ReadLog(dir.log_dir());
  EXPECT_FALSE(IsDead(shim.pid()));
  EXPECT_EQ(ReadFile(usage).value_or(""), "KTESIO_USAGE {\"sequence\":0}\n");
}

TEST(ShimCaptureTest, RotatesAndKeepsOnlyTheNewestSegments) {
  TempDir dir;
  constexpr int kLines = 3000;
  EXPECT_EQ(RunToExit(dir, {{kProbe, "--quiet", "--lines", std::to_string(kLines),
                             "--exit-immediately", "--exit-code", "0"},
                            {"--max-bytes", "4096", "--keep", "2"}}),
            "exited 0\n");
  std::vector<std::uint64_t> segments = ListSegments(dir.log_dir());
  ASSERT_EQ(segments.size(), 3u);  // --keep rotated ones plus the current one.
  // ~66 bytes per record, 3000 records: about 48 segments were written in all.
  EXPECT_GT(segments.back(), 40u);
  EXPECT_EQ(segments[1], segments[0] + 1);
  EXPECT_EQ(segments[2], segments[1] + 1);
  for (std::size_t i = 0; i + 1 < segments.size(); ++i) {
    std::string path = dir.log_dir() + "/" + SegmentFileName(segments[i]);
    std::size_t size = ReadFile(path).value_or("").size();
    EXPECT_GE(size, 4096u);
    EXPECT_LT(size, 4096u + 100u) << "overshoot of more than one record";
  }
  // What is retained is an unbroken tail ending with the last line.
  std::vector<Record> records = ParseRecords(ReadLog(dir.log_dir()));
  ASSERT_FALSE(records.empty());
  int first = std::stoi(records[0].text.substr(5));
  for (std::size_t i = 0; i < records.size(); ++i) {
    ASSERT_TRUE(records[i].text.starts_with("line " + std::to_string(first + i) + " "));
  }
  EXPECT_EQ(first + static_cast<int>(records.size()), kLines);
}

TEST(ShimCaptureTest, ContinuesTheHighestSegmentOfAPreviousRun) {
  TempDir dir;
  ShimArgs args{{kProbe, "--quiet", "--lines", "1", "--exit-immediately"}};
  RunToExit(dir, args);
  RunToExit(dir, args);
  EXPECT_EQ(ListSegments(dir.log_dir()), std::vector<std::uint64_t>{1});
  EXPECT_EQ(ParseRecords(ReadLog(dir.log_dir())).size(), 2u);
}

TEST(ShimCaptureTest, CopiesUsageLinesToTheUsageFile) {
  TempDir dir;
  std::string usage = dir.File("usage.jsonl");
  EXPECT_EQ(RunToExit(dir, {{kProbe, "--lines", "2", "--usage-lines", "3", "--usage-malformed",
                             "--exit-immediately"},
                            {"--usage-file", usage}}),
            "exited 1\n");
  std::string expected;
  for (int i = 0; i < 3; ++i) {
    expected += "KTESIO_USAGE {\"sequence\":" + std::to_string(i) +
                ",\"input_tokens\":10,\"output_tokens\":20}\n";
  }
  expected += "KTESIO_USAGE {\"sequence\":\"x\"}\n";
  EXPECT_EQ(ReadFile(usage), expected);
  struct stat st {};
  ASSERT_EQ(stat(usage.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The log keeps them too, attributed like any other stdout line.
  std::string log = ReadLog(dir.log_dir());
  EXPECT_NE(log.find(" agent-out KTESIO_USAGE {\"sequence\":2,"), std::string::npos);
  // Usage lines on stderr are not usage lines.
  TempDir dir2;
  std::string usage2 = dir2.File("usage.jsonl");
  std::string script = "echo 'KTESIO_USAGE {}' >&2; echo '  KTESIO_USAGE {\"a\":1}'";
  RunToExit(dir2, {{"/bin/sh", "-c", script}, {"--usage-file", usage2}});
  EXPECT_EQ(ReadFile(usage2), "  KTESIO_USAGE {\"a\":1}\n");
  // A usage line too long for one record: the marker takes its place in the usage file (the
  // daemon reports it), while the log keeps its pieces. An ordinary over-long line adds nothing.
  TempDir dir3;
  std::string usage3 = dir3.File("usage.jsonl");
  std::string long_script =
      "printf 'KTESIO_USAGE {\"sequence\":0,%020000d\"input_tokens\":1,\"output_tokens\":1}\\n' 0;"
      "printf 'plain %020000d\\n' 0; echo 'KTESIO_USAGE {\"sequence\":1}'";
  RunToExit(dir3, {{"/bin/sh", "-c", long_script}, {"--usage-file", usage3}});
  EXPECT_EQ(ReadFile(usage3),
            std::string(contract::kOverlongUsageLine) + "\nKTESIO_USAGE {\"sequence\":1}\n");
  EXPECT_NE(ReadLog(dir3.log_dir()).find(" agent-out KTESIO_USAGE {\"sequence\":0,000"),
            std::string::npos);
}

}  // namespace
}  // namespace ktesio::daemon::shim::testing
