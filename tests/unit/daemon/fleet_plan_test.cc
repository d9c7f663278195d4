// The fleet planner's rules (ktesiod/fleet/plan.h), without a daemon.

#include "fleet/plan.h"

#include <deque>

#include "fleet/apply.h"
#include "gtest/gtest.h"

namespace ktesio::daemon::fleet {
namespace {

using v1::PlanAction;

class PlanTest : public ::testing::Test {
 protected:
  // A declared instance of the fleet "team", kind "probe".
  Desired& Declare(const std::string& name, v1::DesiredState state,
                   std::map<std::string, std::string> labels = {},
                   std::map<std::string, std::string> config = {}) {
    v1::FleetInstanceSpec& spec = specs_.emplace_back();
    spec.set_name(name);
    spec.set_builtin_kind("probe");
    spec.set_state(state);
    spec.mutable_labels()->insert(labels.begin(), labels.end());
    Desired& d = desired_.emplace_back();
    d.spec = &spec;
    d.fleet = "team";
    d.adapter.set_kind("probe");
    d.config = std::move(config);
    return d;
  }
  Current& Exists(const std::string& name, v1::AgentState state, Labels labels,
                  std::map<std::string, std::string> config = {}) {
    Current& c = current_.emplace_back();
    c.name = name;
    c.state = state;
    c.adapter.set_kind("probe");
    c.labels = std::move(labels);
    c.config = std::move(config);
    return c;
  }
  std::vector<Step> Plan(bool prune = false) {
    return ComputePlan(desired_, current_, {"team"}, prune);
  }
  static std::vector<PlanAction> Actions(const Step& step) { return step.actions; }

  std::deque<v1::FleetInstanceSpec> specs_;  // stable addresses
  std::vector<Desired> desired_;
  std::vector<Current> current_;
};

const Labels kOwned = {{"ktesio.io/fleet", "team"}};

TEST_F(PlanTest, CreatesAndStartsWhatDoesNotExist) {
  desired_.reserve(2);
  Declare("a", v1::DESIRED_STATE_RUNNING, {{"tier", "x"}}, {{"model", "m"}});
  Declare("b", v1::DESIRED_STATE_UNSPECIFIED);
  std::vector<Step> plan = Plan();
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(Actions(plan[0]),
            (std::vector<PlanAction>{v1::PLAN_ACTION_CREATE, v1::PLAN_ACTION_START}));
  EXPECT_EQ(plan[0].labels, (Labels{{"ktesio.io/fleet", "team"}, {"tier", "x"}}));
  EXPECT_EQ(plan[0].config_to_set, (std::map<std::string, std::string>{{"model", "m"}}));
  EXPECT_EQ(Actions(plan[1]), std::vector<PlanAction>{v1::PLAN_ACTION_CREATE});
}

TEST_F(PlanTest, WhatMatchesIsUnchangedAndPausedCountsAsRunning) {
  desired_.reserve(3);
  Declare("a", v1::DESIRED_STATE_RUNNING, {}, {{"model", "m"}});
  Declare("b", v1::DESIRED_STATE_RUNNING);
  Declare("c", v1::DESIRED_STATE_STOPPED);
  Exists("a", v1::AGENT_STATE_RUNNING, kOwned, {{"model", "m"}, {"other", "kept"}});
  Exists("b", v1::AGENT_STATE_PAUSED, kOwned);
  Exists("c", v1::AGENT_STATE_FAILED, kOwned);
  for (const Step& step : Plan()) {
    EXPECT_TRUE(step.actions.empty()) << step.name;
    EXPECT_TRUE(step.changes.empty()) << step.name;
  }
}

TEST_F(PlanTest, DifferencesBecomeUpdatesStartsAndStops) {
  desired_.reserve(3);
  Declare("a", v1::DESIRED_STATE_UNSPECIFIED, {{"tier", "new"}}, {{"model", "m2"}});
  Declare("b", v1::DESIRED_STATE_RUNNING);
  Declare("c", v1::DESIRED_STATE_STOPPED);
  Exists("a", v1::AGENT_STATE_RUNNING, {{"ktesio.io/fleet", "team"}, {"tier", "old"}},
         {{"model", "m1"}});
  Exists("b", v1::AGENT_STATE_STOPPED, kOwned);
  Exists("c", v1::AGENT_STATE_RUNNING, kOwned);
  std::vector<Step> plan = Plan();
  EXPECT_EQ(Actions(plan[0]), std::vector<PlanAction>{v1::PLAN_ACTION_UPDATE});
  EXPECT_EQ(plan[0].changes,
            (std::vector<std::string>{"label tier: old -> new", "config model: \"m1\" -> \"m2\""}));
  EXPECT_EQ(Actions(plan[1]), std::vector<PlanAction>{v1::PLAN_ACTION_START});
  EXPECT_EQ(Actions(plan[2]), std::vector<PlanAction>{v1::PLAN_ACTION_STOP});
}

TEST_F(PlanTest, AChangedAdapterIsARecreateThatRestoresTheState) {
  Declare("a", v1::DESIRED_STATE_UNSPECIFIED).adapter.set_display_name("new");
  Exists("a", v1::AGENT_STATE_RUNNING, kOwned);
  std::vector<Step> plan = Plan();
  EXPECT_EQ(Actions(plan[0]), std::vector<PlanAction>{v1::PLAN_ACTION_RECREATE});
  EXPECT_TRUE(plan[0].restore_running);
  current_[0].adapter.set_manifest_path("/elsewhere/adapter.toml");
  current_[0].adapter.set_display_name("new");
  EXPECT_TRUE(Plan()[0].actions.empty()) << "where a manifest was read from is not a change";
}

TEST_F(PlanTest, PruneTakesOnlyInstancesOwnedByTheAppliedFleets) {
  Declare("kept", v1::DESIRED_STATE_UNSPECIFIED);
  Exists("kept", v1::AGENT_STATE_REGISTERED, kOwned);
  Exists("gone", v1::AGENT_STATE_RUNNING, kOwned);
  Exists("byhand", v1::AGENT_STATE_RUNNING, {});
  Exists("other", v1::AGENT_STATE_RUNNING, {{"ktesio.io/fleet", "other-team"}});
  std::vector<Step> plan = Plan(/*prune=*/true);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].name, "gone");
  EXPECT_EQ(Actions(plan[0]), std::vector<PlanAction>{v1::PLAN_ACTION_PRUNE});
  EXPECT_EQ(Plan(/*prune=*/false).size(), 1u);
}

TEST_F(PlanTest, AnUnownedInstanceIsAdopted) {
  Declare("a", v1::DESIRED_STATE_UNSPECIFIED);
  Exists("a", v1::AGENT_STATE_REGISTERED, {});
  std::vector<Step> plan = Plan();
  EXPECT_EQ(Actions(plan[0]), std::vector<PlanAction>{v1::PLAN_ACTION_UPDATE});
  EXPECT_EQ(plan[0].changes.front(), "adopted into fleet team");
}

TEST(DisplayValue, MasksLiteralPassThroughValues) {
  EXPECT_EQ(DisplayValue("model", "gpt-5"), "\"gpt-5\"");
  EXPECT_EQ(DisplayValue("agent.OPENAI_API_KEY", "secret:openai"), "\"secret:openai\"");
  EXPECT_EQ(DisplayValue("agent.HOME_DIR", "/srv/x"), "****");
  // A literal credential in a secret-capable key (set by hand, outside any fleet file).
  EXPECT_EQ(DisplayValue("model", "sk-proj-LITERALabcdefghijklmnop123456"), "****");
  EXPECT_EQ(DisplayValue("model", "secret:s2"), "\"secret:s2\"");
}

TEST(LooksLikeCredential, KeyNamesAndKeyShapes) {
  EXPECT_TRUE(LooksLikeCredential("agent.OPENAI_API_KEY", "abc"));
  EXPECT_TRUE(LooksLikeCredential("agent.GH_TOKEN", "x"));
  EXPECT_TRUE(LooksLikeCredential("model", "sk-abcdefghijklmnop"));
  EXPECT_TRUE(LooksLikeCredential("agent.X", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd"));
  EXPECT_FALSE(LooksLikeCredential("agent.OPENAI_API_KEY", "secret:openai"));
  EXPECT_FALSE(LooksLikeCredential("agent.OPENAI_API_KEY", "{env:OPENAI_API_KEY}"));
  EXPECT_FALSE(LooksLikeCredential("model", "anthropic/claude-sonnet-4-20250514"));
  EXPECT_FALSE(LooksLikeCredential("agent.LOG_LEVEL", "debug"));
  EXPECT_FALSE(LooksLikeCredential("restart.policy", "sk-abcdefghijklmnop"))
      << "not secret-capable";
  // Blanks around a key, or its prefix in another case, do not hide it.
  EXPECT_TRUE(LooksLikeCredential("model", " sk-abcdefghijklmnopqrstuvwxyz"));
  EXPECT_TRUE(LooksLikeCredential("model", "sk-abcdefghijklmnop\n"));
  EXPECT_TRUE(LooksLikeCredential("model", "SK-ABCDEFGHIJKLMNOPQRSTU"));
  EXPECT_TRUE(LooksLikeCredential("agent.X", "\tGITHUB_PAT_abcdefghij"));
  EXPECT_FALSE(LooksLikeCredential("model", "sk-short")) << "prefixes count from 16 characters";
  EXPECT_FALSE(LooksLikeCredential("agent.DB_PASSWORD", "")) << "an empty value holds nothing";
  // A reference has no blanks around it: this one would reach the agent as a literal.
  EXPECT_TRUE(LooksLikeCredential("agent.OPENAI_API_KEY", " secret:openai "));
}

}  // namespace
}  // namespace ktesio::daemon::fleet
