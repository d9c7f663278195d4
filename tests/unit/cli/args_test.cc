#include "cli/args.h"

#include "gtest/gtest.h"

namespace ktesio::cli {
namespace {

TEST(Invocation, GlobalFlagsAnywhere) {
  auto before = ParseInvocation({"--json", "--socket", "/s", "agent", "list"});
  auto after = ParseInvocation({"agent", "list", "--socket=/s", "--json"});
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(before->words, after->words);
  EXPECT_EQ(before->words, (std::vector<std::string>{"agent", "list"}));
  EXPECT_TRUE(before->global.json && after->global.json);
  EXPECT_EQ(before->global.socket, "/s");
  EXPECT_EQ(after->global.socket, "/s");
}

TEST(Invocation, TimeoutIsGlobalExceptAfterStop) {
  auto global = ParseInvocation({"--timeout", "2.5", "agent", "list"});
  ASSERT_TRUE(global.ok());
  EXPECT_EQ(global->global.timeout_seconds, 2.5);
  auto stop = ParseInvocation({"agent", "stop", "x", "--timeout", "0"});
  ASSERT_TRUE(stop.ok());
  EXPECT_FALSE(stop->global.timeout_seconds.has_value());
  EXPECT_EQ(stop->words, (std::vector<std::string>{"agent", "stop", "x", "--timeout", "0"}));
  auto rpc_before_stop = ParseInvocation({"--timeout", "9", "agent", "stop", "x"});
  EXPECT_EQ(rpc_before_stop->global.timeout_seconds, 9);
}

TEST(Invocation, BadGlobalValues) {
  EXPECT_FALSE(ParseInvocation({"--socket"}).ok());
  EXPECT_FALSE(ParseInvocation({"--timeout", "-1"}).ok());
  EXPECT_FALSE(ParseInvocation({"--timeout", "abc"}).ok());
  EXPECT_FALSE(ParseInvocation({"--socket="}).ok());
}

TEST(Invocation, DoubleDashStopsGlobalParsing) {
  auto inv = ParseInvocation({"agent", "send", "x", "--", "--json"});
  ASSERT_TRUE(inv.ok());
  EXPECT_FALSE(inv->global.json);
}

TEST(LocalArgs, FlagsAndPositionals) {
  auto local = ParseLocal({"name", "--kind", "mock", "--force"}, {"--kind"}, {"--force"}, 1, 1);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->positionals, std::vector<std::string>{"name"});
  EXPECT_EQ(local->Value("--kind"), "mock");
  EXPECT_TRUE(local->Has("--force"));
  EXPECT_FALSE(ParseLocal({"--nope"}, {}, {}, 0, 1).ok());
  EXPECT_FALSE(ParseLocal({}, {}, {}, 1, 1).ok());
  EXPECT_FALSE(ParseLocal({"a", "b"}, {}, {}, 1, 1).ok());
  EXPECT_FALSE(ParseLocal({"--kind"}, {"--kind"}, {}, 0, 0).ok());
  EXPECT_FALSE(ParseLocal({"--force=yes"}, {}, {"--force"}, 0, 0).ok());
  auto dashed = ParseLocal({"x", "--", "-text"}, {}, {}, 2, 2);
  ASSERT_TRUE(dashed.ok());
  EXPECT_EQ(dashed->positionals[1], "-text");
}

}  // namespace
}  // namespace ktesio::cli
