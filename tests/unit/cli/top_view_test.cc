#include "cli/top_view.h"

#include "gtest/gtest.h"

namespace ktesio::cli::top {
namespace {

v1::AgentInstance* Add(v1::ListAgentsResponse& response, const std::string& name,
                       v1::AgentState state) {
  v1::AgentInstance* instance = response.add_instances();
  instance->set_name(name);
  instance->set_state(state);
  return instance;
}

void SetSample(v1::AgentInstance* instance, double cpu_seconds, uint64_t rss, uint64_t in,
               uint64_t out) {
  instance->mutable_resources()->set_cpu_seconds(cpu_seconds);
  instance->mutable_resources()->set_resident_memory_bytes(rss);
  instance->mutable_usage()->set_cumulative_input_tokens(in);
  instance->mutable_usage()->set_cumulative_output_tokens(out);
}

std::vector<std::string> Names(const std::vector<Row>& rows) {
  std::vector<std::string> names;
  for (const Row& row : rows) {
    names.push_back(row.name);
  }
  return names;
}

TEST(TopRates, CpuAndTokensFromTheDeltaOverWallTime) {
  RateTracker rates(500);
  v1::ListAgentsResponse first;
  SetSample(Add(first, "a", v1::AGENT_STATE_RUNNING), 10.0, 1 << 20, 100, 50);
  rates.Observe(first, 1000);
  EXPECT_FALSE(rates.For("a").measured);

  v1::ListAgentsResponse second;
  SetSample(Add(second, "a", v1::AGENT_STATE_RUNNING), 11.0, 1 << 20, 400, 150);
  rates.Observe(second, 3000);  // 2 s later: 1 CPU second, 400 tokens
  const Rates r = rates.For("a");
  EXPECT_TRUE(r.measured);
  EXPECT_DOUBLE_EQ(r.cpu_percent, 50.0);
  EXPECT_DOUBLE_EQ(r.tokens_per_minute, 12000.0);
}

TEST(TopRates, APollSoonerThanTheWindowKeepsBaselineAndRates) {
  RateTracker rates(1000);
  v1::ListAgentsResponse sample;
  v1::AgentInstance* a = Add(sample, "a", v1::AGENT_STATE_RUNNING);
  SetSample(a, 0.0, 0, 0, 0);
  rates.Observe(sample, 0);
  SetSample(a, 2.0, 0, 0, 0);
  rates.Observe(sample, 2000);
  EXPECT_DOUBLE_EQ(rates.For("a").cpu_percent, 100.0);
  SetSample(a, 2.1, 0, 0, 0);
  rates.Observe(sample, 2100);  // 100 ms later: too short a window
  EXPECT_DOUBLE_EQ(rates.For("a").cpu_percent, 100.0);
  SetSample(a, 2.5, 0, 0, 0);
  rates.Observe(sample, 3000);  // against the baseline at 2000
  EXPECT_DOUBLE_EQ(rates.For("a").cpu_percent, 50.0);
}

TEST(TopRates, ANewRunCountsFromZeroAndAGoneInstanceIsForgotten) {
  RateTracker rates(0);
  v1::ListAgentsResponse sample;
  v1::AgentInstance* a = Add(sample, "a", v1::AGENT_STATE_RUNNING);
  a->set_current_run(1);
  SetSample(a, 30.0, 0, 10, 0);
  rates.Observe(sample, 0);
  a->set_current_run(2);
  SetSample(a, 0.5, 0, 10, 0);  // restarted: CPU seconds began again
  rates.Observe(sample, 1000);
  EXPECT_DOUBLE_EQ(rates.For("a").cpu_percent, 50.0);
  EXPECT_DOUBLE_EQ(rates.For("a").tokens_per_minute, 0.0);
  rates.Observe(v1::ListAgentsResponse(), 2000);
  EXPECT_FALSE(rates.For("a").measured);
}

TEST(TopRows, StoppedInstancesHaveNoUptimeOrResources) {
  v1::ListAgentsResponse response;
  v1::AgentInstance* live = Add(response, "live", v1::AGENT_STATE_RUNNING);
  live->set_started_at_unix_ms(10'000);
  SetSample(live, 1, 4096, 0, 0);
  v1::AgentInstance* dead = Add(response, "dead", v1::AGENT_STATE_FAILED);
  dead->set_started_at_unix_ms(10'000);
  dead->set_failed_cause("crashed{exit code 3}");
  dead->mutable_usage()->set_cumulative_dollars(1'500'000);
  dead->mutable_budget()->set_per_run_limit(100);
  dead->mutable_budget()->set_per_run_remaining(40);
  dead->mutable_budget()->set_cumulative_limit(1000);
  dead->mutable_budget()->set_cumulative_remaining(30);
  const std::vector<Row> rows = BuildRows(response, RateTracker(0), 75'000);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].uptime_seconds, 65);
  EXPECT_TRUE(rows[0].has_resources);
  EXPECT_FALSE(rows[1].uptime_seconds.has_value());
  EXPECT_FALSE(rows[1].has_resources);
  EXPECT_EQ(rows[1].cause, "crashed{exit code 3}");
  EXPECT_EQ(rows[1].micro_dollars, 1'500'000);
  ASSERT_TRUE(rows[1].budget.has_value());
  EXPECT_EQ(rows[1].budget->tokens, 30u);  // the tighter of per-run and cumulative
  EXPECT_FALSE(rows[1].budget->micro_dollars.has_value());
}

TEST(TopSort, EachKeyAndReverse) {
  std::vector<Row> rows(3);
  rows[0].name = "b";
  rows[0].state = v1::AGENT_STATE_RUNNING;
  rows[0].has_resources = true;
  rows[0].rates.cpu_percent = 5;
  rows[0].resident_memory_bytes = 300;
  rows[0].restarts = 1;
  rows[1].name = "a";
  rows[1].state = v1::AGENT_STATE_FAILED;
  rows[1].micro_dollars = 7;
  rows[1].rates.tokens_per_minute = 10;
  rows[2].name = "c";
  rows[2].state = v1::AGENT_STATE_STOPPED;
  rows[2].has_resources = true;
  rows[2].rates.cpu_percent = 50;
  rows[2].resident_memory_bytes = 100;
  rows[2].restarts = 1;
  const std::vector<std::pair<SortKey, std::vector<std::string>>> cases = {
      {SortKey::kName, {"a", "b", "c"}},     {SortKey::kState, {"a", "b", "c"}},
      {SortKey::kCpu, {"c", "b", "a"}},      {SortKey::kMem, {"b", "c", "a"}},
      {SortKey::kRestarts, {"b", "c", "a"}}, {SortKey::kTokens, {"a", "b", "c"}},
      {SortKey::kSpend, {"a", "b", "c"}}};
  for (const auto& [key, want] : cases) {
    SortRows(rows, key, false);
    EXPECT_EQ(Names(rows), want) << SortKeyName(key);
    SortRows(rows, key, true);
    EXPECT_EQ(Names(rows), std::vector<std::string>(want.rbegin(), want.rend()))
        << SortKeyName(key);
  }
}

TEST(TopSort, KeysCycleAndParse) {
  SortKey key = SortKey::kName;
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(ParseSortKey(SortKeyName(key)), key);
    key = NextSortKey(key);
  }
  EXPECT_EQ(key, SortKey::kName);
  EXPECT_EQ(ParseSortKey("tokens"), SortKey::kTokens);
  EXPECT_FALSE(ParseSortKey("pid").has_value());
}

TEST(TopEvents, TransitionUpdatesStateAndCause) {
  v1::ListAgentsResponse response;
  SetSample(Add(response, "a", v1::AGENT_STATE_RUNNING), 1, 1, 0, 0);
  EXPECT_TRUE(ApplyTransition(
      response, "a",
      R"({"schema_version":1,"instance":"a","prior_state":"running","new_state":"failed",)"
      R"("cause":"crashed{exit code 3 \"x\"}","at":"2026-01-01T00:00:00.000Z"})"));
  EXPECT_EQ(response.instances(0).state(), v1::AGENT_STATE_FAILED);
  EXPECT_EQ(response.instances(0).cause(), "crashed{exit code 3 \"x\"}");
  EXPECT_FALSE(response.instances(0).has_resources());
  EXPECT_FALSE(ApplyTransition(response, "other", R"({"new_state":"running"})"));
  EXPECT_FALSE(ApplyTransition(response, "a", R"({"new_state":"weird"})"));
}

TEST(TopFormat, Units) {
  EXPECT_EQ(FormatBytes(512), "512B");
  EXPECT_EQ(FormatBytes(1536), "1.5K");
  EXPECT_EQ(FormatBytes(300ull << 20), "300M");
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1234), "1.2k");
  EXPECT_EQ(FormatCount(45'000), "45k");
  EXPECT_EQ(FormatCount(3'400'000), "3.4M");
  EXPECT_EQ(FormatUptime(45), "45s");
  EXPECT_EQ(FormatUptime(250), "4m10s");
  EXPECT_EQ(FormatUptime(3 * 86400 + 4 * 3600), "3d04h");
  EXPECT_EQ(FormatSpend(1'234'567), "$1.23");
  EXPECT_EQ(ShortCause("budget-exceeded{scope=run} pause-best-effort"), "budget-exceeded");
  EXPECT_EQ(Truncate("abcdef", 4, true), "abc…");
  EXPECT_EQ(Truncate("abcdef", 4, false), "abc~");
  EXPECT_EQ(Truncate("abc", 4, true), "abc");
  EXPECT_EQ(DisplayWidth("a—…"), 3u);
}

TEST(TopFormat, DaemonTitleUsesAsciiWithoutAUtf8Locale) {
  v1::GetStatusResponse status;
  status.mutable_version()->set_daemon_version("1.0.0");
  status.set_pid(42);
  status.set_started_at_unix_ms(1'000'000);
  status.set_os("linux");
  status.set_socket_path("/run/k.sock");
  status.add_problems("ktesio-shim missing");
  EXPECT_EQ(DaemonTitle(status, 1'045'000, true),
            "ktesiod 1.0.0 pid 42 up 45s · linux · /run/k.sock · 1 problem");
  EXPECT_EQ(DaemonTitle(status, 1'045'000, false),
            "ktesiod 1.0.0 pid 42 up 45s | linux | /run/k.sock | 1 problem");
}

FrameInput Fleet(size_t count) {
  FrameInput input;
  input.title =
      "ktesiod 1.0.0 pid 1 up 3h05m · linux · /a/very/long/socket/path/that/goes/on/"
      "and/on/ktesiod.sock";
  for (size_t i = 0; i < count; ++i) {
    Row row;
    row.name = "agent-with-a-rather-long-descriptive-name-" + std::to_string(i);
    row.state = v1::AGENT_STATE_FAILED;
    row.cause = "crash-loop{5 consecutive crashes, last: exit code 1}";
    row.uptime_seconds = 100'000;
    row.restarts = 12345;
    row.has_resources = true;
    row.rates = {true, 1234.5, 123456.0};
    row.resident_memory_bytes = 5ull << 30;
    row.micro_dollars = 123'456'789'000;
    row.budget = BudgetRemaining{1'000'000, std::nullopt};
    input.rows.push_back(row);
  }
  return input;
}

TEST(TopFrame, EightyByTwentyFourNeverExceedsTheScreen) {
  for (bool utf8 : {true, false}) {
    FrameInput input = Fleet(50);
    input.utf8 = utf8;
    input.selector = "team=payments,env in (prod,staging)";
    const std::vector<std::string> frame = RenderFrame(input, 80, 24);
    ASSERT_EQ(frame.size(), 24u);
    for (const std::string& line : frame) {
      EXPECT_LE(DisplayWidth(line), 80u) << line;
      EXPECT_EQ(line.find('\n'), std::string::npos);
    }
    EXPECT_NE(frame[3].find(utf8 ? "…" : "~"), std::string::npos) << frame[3];
    EXPECT_EQ(frame[3].rfind("agent-with", 0), 0u) << frame[3];
    EXPECT_NE(frame[23].find("1-20/50"), std::string::npos) << frame[23];
  }
}

TEST(TopFrame, ScrollShowsLaterRowsAndClamps) {
  FrameInput input = Fleet(30);
  input.scroll = 5;
  std::vector<std::string> frame = RenderFrame(input, 200, 24);
  EXPECT_NE(frame[3].find("name-5 "), std::string::npos) << frame[3];
  input.scroll = 1000;
  frame = RenderFrame(input, 200, 24);
  EXPECT_NE(frame[22].find("name-29 "), std::string::npos) << frame[22];
  EXPECT_NE(frame[23].find("11-30/30"), std::string::npos) << frame[23];
  EXPECT_EQ(MaxScroll(30, 24), 10u);
}

TEST(TopFrame, NarrowTerminalsDropColumnsButKeepNameAndState) {
  const FrameInput input = Fleet(3);
  for (size_t width : {20u, 40u, 60u, 80u, 120u}) {
    const std::vector<std::string> table =
        RenderTable(input.rows, SortKey::kCpu, false, width, true);
    for (const std::string& line : table) {
      EXPECT_LE(DisplayWidth(line), width) << width << ": " << line;
    }
    EXPECT_EQ(table[0].rfind("NAME", 0), 0u) << table[0];
    EXPECT_NE(table[0].find("STATE"), std::string::npos) << table[0];
  }
  const std::vector<std::string> wide = RenderTable(input.rows, SortKey::kCpu, false, 0, true);
  EXPECT_NE(wide[0].find("RESTARTS"), std::string::npos);
  EXPECT_NE(wide[0].find("CPU%▼"), std::string::npos) << wide[0];
  EXPECT_NE(wide[1].find("failed (crash-loop)"), std::string::npos) << wide[1];
}

TEST(TopFrame, EmptyFleetAndTinyTerminals) {
  FrameInput input;
  input.title = "t";
  std::vector<std::string> frame = RenderFrame(input, 80, 24);
  ASSERT_EQ(frame.size(), 24u);
  EXPECT_EQ(frame[1].rfind("0 agents", 0), 0u) << frame[1];
  EXPECT_EQ(frame[3], "no agents registered");
  EXPECT_NE(frame[23].find("q quit"), std::string::npos);
  for (size_t height : {0u, 1u, 3u, 5u}) {
    EXPECT_LE(RenderFrame(Fleet(4), 10, height).size(), height);
  }
  input.status = "selector: app=_";
  EXPECT_EQ(RenderFrame(input, 80, 24)[23], "selector: app=_");
}

TEST(TopJson, SnapshotDocument) {
  std::vector<Row> rows(1);
  rows[0].name = "a";
  rows[0].state = v1::AGENT_STATE_RUNNING;
  rows[0].cause = "adapter-ready";
  rows[0].uptime_seconds = 5;
  rows[0].has_resources = true;
  rows[0].resident_memory_bytes = 4096;
  rows[0].rates = {true, 12.25, 60};
  rows[0].budget = BudgetRemaining{std::nullopt, 2500};
  EXPECT_EQ(SnapshotJson(rows),
            R"({"schema_version":1,"instances":[{"name":"a","state":"running",)"
            R"("cause":"adapter-ready","uptime_seconds":5,"restarts":0,"cpu_percent":12.2,)"
            R"("resident_memory_bytes":4096,"tokens_per_minute":60.0,"dollars":null,)"
            R"("budget_remaining":{"dollars":2500}}]})");
}

TEST(TopKeys, DecodesArrowsPagesAndText) {
  const std::vector<Key> keys = DecodeKeys("q\x1b[A\x1b[B\x1b[5~\x1b[6~\x1bOA\r\x7f\x03\x1bé");
  const std::vector<KeyKind> want = {KeyKind::kChar,   KeyKind::kUp,        KeyKind::kDown,
                                     KeyKind::kPageUp, KeyKind::kPageDown,  KeyKind::kUp,
                                     KeyKind::kEnter,  KeyKind::kBackspace, KeyKind::kCtrlC,
                                     KeyKind::kEscape, KeyKind::kChar};
  ASSERT_EQ(keys.size(), want.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(keys[i].kind, want[i]) << i;
  }
  EXPECT_EQ(keys[0].text, "q");
  EXPECT_EQ(keys.back().text, "é");
  EXPECT_EQ(DecodeKeys("\x1b").front().kind, KeyKind::kEscape);
}

Key Char(const std::string& text) { return {KeyKind::kChar, text}; }

TEST(TopKeys, SortReverseScrollAndQuit) {
  ViewState view;
  EXPECT_EQ(ApplyKey(view, Char("s"), 20, 10).action, KeyAction::kNone);
  EXPECT_EQ(view.sort, SortKey::kState);
  ApplyKey(view, Char("r"), 20, 10);
  EXPECT_TRUE(view.reverse);
  ApplyKey(view, {KeyKind::kPageDown, ""}, 20, 10);
  EXPECT_EQ(view.scroll, 10u);  // clamped to the last page
  ApplyKey(view, {KeyKind::kUp, ""}, 20, 10);
  EXPECT_EQ(view.scroll, 9u);
  ApplyKey(view, {KeyKind::kHome, ""}, 20, 10);
  EXPECT_EQ(view.scroll, 0u);
  ApplyKey(view, {KeyKind::kUp, ""}, 20, 10);
  EXPECT_EQ(view.scroll, 0u);
  EXPECT_EQ(ApplyKey(view, Char("q"), 20, 10).action, KeyAction::kQuit);
  EXPECT_EQ(ApplyKey(view, {KeyKind::kCtrlC, ""}, 20, 10).action, KeyAction::kQuit);
}

TEST(TopKeys, SelectorPromptEditsAppliesAndCancels) {
  ViewState view;
  view.selector = "a=1";
  view.message = "old error";
  ApplyKey(view, Char("/"), 20, 0);
  ASSERT_TRUE(view.prompt.has_value());
  EXPECT_EQ(*view.prompt, "a=1");
  EXPECT_TRUE(view.message.empty());
  ApplyKey(view, {KeyKind::kCtrlU, ""}, 20, 0);
  for (const char* text : {"q", "=", "é", "x"}) {
    EXPECT_EQ(ApplyKey(view, Char(text), 20, 0).action, KeyAction::kNone);  // q is text here
  }
  ApplyKey(view, {KeyKind::kBackspace, ""}, 20, 0);
  ApplyKey(view, {KeyKind::kBackspace, ""}, 20, 0);  // the two bytes of é go together
  const KeyResult applied = ApplyKey(view, {KeyKind::kEnter, ""}, 20, 0);
  EXPECT_EQ(applied.action, KeyAction::kApplySelector);
  EXPECT_EQ(applied.selector, "q=");
  EXPECT_FALSE(view.prompt.has_value());
  EXPECT_EQ(view.selector, "a=1");  // the caller adopts it once the daemon accepts it
  ApplyKey(view, Char("f"), 20, 0);
  ApplyKey(view, Char("z"), 20, 0);
  EXPECT_EQ(ApplyKey(view, {KeyKind::kEscape, ""}, 20, 0).action, KeyAction::kNone);
  EXPECT_FALSE(view.prompt.has_value());
  EXPECT_EQ(view.selector, "a=1");
}

}  // namespace
}  // namespace ktesio::cli::top
