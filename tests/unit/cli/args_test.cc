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

// A syntax like `agent remove`: targets (names and a selector combine, --all stands alone), an
// optional pair of alternatives and a plain switch.
const std::vector<Arg> kRemoveLike = {
    {.name = "NAME...", .need = Arg::kRequired, .group = 1, .combinable = true},
    {.name = "--selector",
     .value = "SEL",
     .need = Arg::kRequired,
     .group = 1,
     .combinable = true,
     .alias = "-l"},
    {.name = "--all", .need = Arg::kRequired, .group = 1},
    {.name = "--retain", .group = 2},
    {.name = "--delete", .group = 2},
    {.name = "--force"}};

std::string ErrorOf(const std::vector<std::string>& args, const std::vector<Arg>& syntax) {
  absl::StatusOr<LocalArgs> local = ParseArgs(args, syntax);
  return local.ok() ? "ok" : std::string(local.status().message());
}

TEST(ParseArgs, FlagsOperandsAndAliases) {
  auto local = ParseArgs({"a", "-l", "team=x", "b", "--force"}, kRemoveLike);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->positionals, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(local->Value("--selector"), "team=x");  // stored under the declared name
  EXPECT_FALSE(local->Value("-l").has_value());
  EXPECT_TRUE(local->Has("--force"));
  EXPECT_FALSE(local->Has("--all"));
  auto inline_value = ParseArgs({"--selector=a=b"}, kRemoveLike);
  ASSERT_TRUE(inline_value.ok());
  EXPECT_EQ(inline_value->Value("--selector"), "a=b");
}

TEST(ParseArgs, RefusesWhatTheSyntaxDoesNotAllow) {
  EXPECT_EQ(ErrorOf({"a", "--nope"}, kRemoveLike), "unknown flag '--nope'");
  EXPECT_EQ(ErrorOf({"a", "--force=yes"}, kRemoveLike), "--force takes no value");
  EXPECT_EQ(ErrorOf({"--selector"}, kRemoveLike), "--selector needs a value (SEL)");
  EXPECT_EQ(ErrorOf({"-l", ""}, kRemoveLike), "-l needs a non-empty value (SEL)");
  EXPECT_EQ(ErrorOf({}, kRemoveLike), "give NAME..., --selector SEL or --all");
  EXPECT_EQ(ErrorOf({"a", "--all"}, kRemoveLike), "NAME... and --all exclude each other");
  EXPECT_EQ(ErrorOf({"-l", "x", "--all"}, kRemoveLike), "--selector and --all exclude each other");
  EXPECT_EQ(ErrorOf({"a", "--retain", "--delete"}, kRemoveLike),
            "--retain and --delete exclude each other");
  EXPECT_EQ(ErrorOf({"--all"}, kRemoveLike), "ok");
}

TEST(ParseArgs, OperandsInOrderAndAlternativesToAFlag) {
  const std::vector<Arg> send = {{.name = "NAME", .need = Arg::kRequired},
                                 {.name = "TEXT", .need = Arg::kRequired, .group = 1},
                                 {.name = "--stdin", .need = Arg::kRequired, .group = 1}};
  EXPECT_EQ(ErrorOf({"x", "hello"}, send), "ok");
  EXPECT_EQ(ErrorOf({"x", "--stdin"}, send), "ok");
  EXPECT_EQ(ErrorOf({"--stdin"}, send), "missing NAME");
  EXPECT_EQ(ErrorOf({"x"}, send), "give TEXT or --stdin");
  EXPECT_EQ(ErrorOf({"x", "hello", "--stdin"}, send), "TEXT and --stdin exclude each other");
  EXPECT_EQ(ErrorOf({"x", "hello", "extra"}, send), "unexpected argument 'extra'");
  auto dashed = ParseArgs({"x", "--", "-text"}, send);  // `--` ends the flags
  ASSERT_TRUE(dashed.ok());
  EXPECT_EQ(dashed->positionals[1], "-text");
  // No flag starts with a digit: a negative number is a value (`config set x k -1` then gets
  // the daemon's range error, not "unknown flag").
  auto negative = ParseArgs({"x", "-1"}, send);
  ASSERT_TRUE(negative.ok()) << negative.status();
  EXPECT_EQ(negative->positionals[1], "-1");
  EXPECT_EQ(ErrorOf({"x", "-t"}, send), "unknown flag '-t'");
}

TEST(ParseArgs, ARepeatableFlagKeepsEveryValue) {
  const std::vector<Arg> apply = {{.name = "-f",
                                   .value = "FILE",
                                   .need = Arg::kRequired,
                                   .alias = "--filename",
                                   .repeatable = true}};
  auto local = ParseArgs({"-f", "a.toml", "--filename=b", "-f=c"}, apply);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->Values("-f"), (std::vector<std::string>{"a.toml", "b", "c"}));
  EXPECT_EQ(ErrorOf({}, apply), "missing -f FILE");
}

// A selector given twice selects by both (its requirements joined), never by the last alone.
TEST(ParseArgs, AJoiningFlagMeansAllOfItsValues) {
  const std::vector<Arg> syntax = {
      {.name = "--selector", .value = "SEL", .alias = "-l", .join = ","},
      {.name = "--timeout", .value = "SECS"}};
  auto local = ParseArgs({"-l", "team=a", "--selector=tier in (x,y)", "--timeout", "1"}, syntax);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->Value("--selector"), "team=a,tier in (x,y)");
  EXPECT_EQ(local->Value("--timeout"), "1");
}

// Any other value flag given twice is refused: taking the last would hide a mistake
// ("--manifest a --manifest b" registering the wrong adapter).
TEST(ParseArgs, AValueFlagGivenTwiceIsRefused) {
  const std::vector<Arg> syntax = {{.name = "--timeout", .value = "SECS"}, {.name = "--force"}};
  EXPECT_EQ(ErrorOf({"--timeout", "1", "--timeout=2"}, syntax),
            "--timeout given twice ('1' and '2'): give it once");
  EXPECT_TRUE(ParseArgs({"--force", "--force"}, syntax).ok()) << "a switch twice is harmless";
}

TEST(ParseInvocation, AGlobalSwitchTakesNoValue) {
  for (const char* given : {"--json=1", "--help=x", "--version="}) {
    absl::StatusOr<Invocation> inv = ParseInvocation({given, "agent", "list"});
    ASSERT_FALSE(inv.ok()) << given;
    EXPECT_NE(inv.status().message().find("takes no value"), std::string_view::npos)
        << inv.status();
  }
}

TEST(Synopsis, RendersOperandsFlagsAndAlternatives) {
  EXPECT_EQ(Synopsis(kRemoveLike),
            "(NAME... | --selector SEL | --all) [--retain | --delete] [--force]");
  const std::vector<Arg> get = {
      {.name = "NAME", .need = Arg::kRequired}, {.name = "KEY"}, {.name = "--reveal"}};
  EXPECT_EQ(Synopsis(get), "NAME [KEY] [--reveal]");
  const std::vector<Arg> apply = {
      {.name = "-f", .value = "FILE|DIR", .need = Arg::kRequired, .repeatable = true},
      {.name = "--stop-timeout", .value = "SECS"}};
  EXPECT_EQ(Synopsis(apply), "-f FILE|DIR [-f ...] [--stop-timeout SECS]");
  EXPECT_EQ(ArgLabel(kRemoveLike[1]), "--selector, -l SEL");
}

}  // namespace
}  // namespace ktesio::cli
