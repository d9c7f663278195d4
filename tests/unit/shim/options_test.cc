#include "options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ktesio::daemon::shim {
namespace {

ParseResult Parse(std::vector<std::string_view> args) { return ParseOptions(args); }

TEST(OptionsTest, ParsesTheFullCommandLine) {
  ParseResult r =
      Parse({"--run-dir",   "/r",   "--log-dir", "/l",     "--cwd",      "/c", "--stdin-fifo",
             "--max-bytes", "8192", "--keep",    "5",      "--ready-fd", "7",  "--usage-file",
             "/u",          "--",   "agent",     "--flag", "--",         "x"});
  ASSERT_TRUE(r.options) << r.error;
  const Options& o = *r.options;
  EXPECT_EQ(o.run_dir, "/r");
  EXPECT_EQ(o.log_dir, "/l");
  EXPECT_EQ(o.cwd, "/c");
  EXPECT_TRUE(o.stdin_fifo);
  EXPECT_EQ(o.max_bytes, 8192u);
  EXPECT_EQ(o.keep, 5);
  EXPECT_EQ(o.ready_fd, 7);
  EXPECT_EQ(o.usage_file, "/u");
  EXPECT_EQ(o.command, (std::vector<std::string>{"agent", "--flag", "--", "x"}));
}

TEST(OptionsTest, AppliesDefaults) {
  ParseResult r = Parse({"--run-dir=/r", "--log-dir=/l", "--cwd=/c", "--", "agent"});
  ASSERT_TRUE(r.options) << r.error;
  EXPECT_FALSE(r.options->stdin_fifo);
  EXPECT_EQ(r.options->max_bytes, 10485760u);
  EXPECT_EQ(r.options->keep, 3);
  EXPECT_EQ(r.options->ready_fd, -1);
  EXPECT_EQ(r.options->usage_file, "");
}

TEST(OptionsTest, RejectsBadCommandLines) {
  const std::vector<std::vector<std::string_view>> bad = {
      {},
      {"--run-dir", "/r", "--log-dir", "/l", "--", "agent"},            // No --cwd.
      {"--run-dir", "/r", "--log-dir", "/l", "--cwd", "/c"},            // No "--".
      {"--run-dir", "/r", "--log-dir", "/l", "--cwd", "/c", "--"},      // No EXEC.
      {"--run-dir", "/r", "--log-dir", "/l", "--cwd", "/c", "--", ""},  // Empty EXEC.
      {"--run-dir", "/r", "--log-dir", "/l", "--cwd", "/c", "--bogus", "--", "a"},
      {"--run-dir", "/r", "--run-dir", "/s", "--log-dir", "/l", "--cwd", "/c", "--", "a"},
      {"--run-dir", "/r", "--log-dir", "/l", "--cwd", "/c", "--max-bytes", "4095", "--", "a"},
      {"--run-dir", "/r", "--log-dir", "/l", "--cwd", "/c", "--max-bytes", "1k", "--", "a"},
      {"--run-dir", "/r", "--log-dir", "/l", "--cwd", "/c", "--keep", "0", "--", "a"},
      {"--run-dir", "/r", "--log-dir", "/l", "--cwd", "/c", "--keep", "-1", "--", "a"},
      {"--run-dir", "/r", "--log-dir", "/l", "--cwd", "/c", "--ready-fd", "1", "--", "a"},
      {"--run-dir", "/r", "--log-dir", "/l", "--cwd", "/c", "--stdin-fifo=1", "--", "a"},
      {"--run-dir", "/r", "--log-dir", "/l", "--cwd", "--", "a"},  // --cwd no value.
      {"--run-dir=", "--log-dir", "/l", "--cwd", "/c", "--", "a"},
  };
  for (const auto& args : bad) {
    ParseResult r = Parse(args);
    EXPECT_FALSE(r.options.has_value()) << testing::PrintToString(args);
    EXPECT_FALSE(r.error.empty()) << testing::PrintToString(args);
  }
}

TEST(OptionsTest, AcceptsTheMinimums) {
  ParseResult r = Parse({"--run-dir", "/r", "--log-dir", "/l", "--cwd", "/c", "--max-bytes", "4096",
                         "--keep", "1", "--", "a"});
  ASSERT_TRUE(r.options) << r.error;
  EXPECT_EQ(r.options->max_bytes, 4096u);
  EXPECT_EQ(r.options->keep, 1);
}

TEST(OptionsTest, Help) {
  EXPECT_TRUE(Parse({"--help"}).help);
  EXPECT_NE(UsageText().find("--run-dir DIR"), std::string_view::npos);
}

}  // namespace
}  // namespace ktesio::daemon::shim
