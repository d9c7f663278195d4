#include "cli/render.h"

#include "gtest/gtest.h"

namespace ktesio::cli {
namespace {

TEST(Render, DollarsRoundHalfUpToCents) {
  EXPECT_EQ(FormatDollars(0), "$0.00 (estimated)");
  EXPECT_EQ(FormatDollars(1234567), "$1.23 (estimated)");
  EXPECT_EQ(FormatDollars(1235000), "$1.24 (estimated)");
  EXPECT_EQ(FormatDollars(4999), "$0.00 (estimated)");
  EXPECT_EQ(FormatDollars(5000), "$0.01 (estimated)");
}

// The budget column shows dollar caps as it shows token limits: remaining/ceiling.
TEST(Render, BudgetShowsRemainingAndCeilingForTokensAndDollars) {
  v1::AgentInstance instance;
  instance.set_name("b");
  v1::BudgetView& budget = *instance.mutable_budget();
  budget.set_per_run_limit(1000);
  budget.set_per_run_remaining(750);
  budget.set_per_run_cost_cap(5000000);
  budget.set_per_run_dollars_remaining(400000);
  budget.set_cumulative_cost_cap(10000000);
  budget.set_cumulative_dollars_remaining(0);
  budget.set_breach_action(v1::BREACH_ACTION_PAUSE);
  const std::string text = ShowText(instance);
  EXPECT_NE(text.find("run 750/1000, run $0.40/$5.00 (estimated), total $0.00/$10.00 (estimated), "
                      "pause"),
            std::string::npos)
      << text;
}

TEST(Render, TerminalTextEscapesControlBytesOnly) {
  EXPECT_EQ(TerminalText("plain text, caf\xc3\xa9 \\ \"q\""), "plain text, caf\xc3\xa9 \\ \"q\"");
  EXPECT_EQ(TerminalText("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(TerminalText("\x1b[2J\x07"), "\\x1b[2J\\x07");
  EXPECT_EQ(TerminalText(std::string("n\0ul\x7f", 5)), "n\\x00ul\\x7f");
  EXPECT_EQ(TerminalText(""), "");
  // C1 controls (U+009B is CSI) and bytes that are not UTF-8 (a raw 0x9B too).
  EXPECT_EQ(TerminalText("a\xc2\x9b"
                         "31mb"),
            "a\\xc2\\x9b31mb");
  EXPECT_EQ(TerminalText("\x9b"
                         "2J\xff"),
            "\\x9b2J\\xff");
  EXPECT_EQ(TerminalText("\xc2\xa0nbsp \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\xc2\xa0nbsp \xe2\x82\xac \xf0\x9f\x98\x80");    // U+00A0, U+20AC, U+1F600 stay
  EXPECT_EQ(TerminalText("cut \xe2\x82"), "cut \\xe2\\x82");  // a truncated sequence
}

TEST(Render, FleetEntryOmitsAbsentOptionalsAndKeepsNullBudget) {
  v1::AgentInstance instance;
  instance.set_name("n");
  instance.set_kind("k");
  instance.set_state(v1::AGENT_STATE_RUNNING);
  instance.set_agent_home("/h");
  contract::JsonWriter json;
  WriteFleetEntry(json, instance);
  EXPECT_EQ(json.str(),
            "{\"name\":\"n\",\"kind\":\"k\",\"state\":\"running\",\"restart_count\":0,"
            "\"restart_policy\":\"on-failure\",\"budget\":null,\"usage\":{"
            "\"cumulative_input_tokens\":0,\"cumulative_output_tokens\":0,"
            "\"current_run_input_tokens\":0,\"current_run_output_tokens\":0,"
            "\"unknown_usage_calls\":0},\"metering_source\":\"self-reported\","
            "\"agent_home\":\"/h\"}");
}

TEST(Render, FleetEntryAdditiveFieldsAreNumbers) {
  v1::AgentInstance instance;
  instance.set_pid(4242);
  instance.set_started_at_unix_ms(0);
  instance.mutable_usage()->set_cumulative_dollars(1500000);
  instance.mutable_usage()->set_estimate_label("estimated");
  instance.mutable_budget()->set_per_run_limit(1000);
  instance.mutable_budget()->set_breach_action(v1::BREACH_ACTION_STOP);
  contract::JsonWriter json;
  WriteFleetEntry(json, instance);
  const std::string& s = json.str();
  EXPECT_NE(s.find("\"pid\":4242"), std::string::npos) << s;
  EXPECT_NE(s.find("\"started_at\":\"1970-01-01T00:00:00.000Z\""), std::string::npos) << s;
  EXPECT_NE(s.find("\"cumulative_dollars\":1500000"), std::string::npos) << s;
  EXPECT_NE(s.find("\"budget\":{\"per_run_limit\":1000,\"breach_action\":\"stop\"}"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace ktesio::cli
