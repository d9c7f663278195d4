// Fleet files: the syntactic half every client shares (docs/fleet-file.md).

#include "ktesio/contract/fleet_file.h"

#include "gtest/gtest.h"

namespace ktesio::contract {
namespace {

std::string Joined(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems) {
    out += p + "\n";
  }
  return out;
}

TEST(FleetFile, TheMinimumShapeFromTheSpecification) {
  FleetFileParse parsed = ParseFleetFile(R"([fleet]
name = "team-a"

[agents.coder-1]
manifest = "adapters/codex"
state = "running"
labels = { team = "a", tier = "batch" }

[agents.coder-1.config]
model = "gpt-5"
budget.tokens.per_run = "200000"
"agent.OPENAI_API_KEY" = "secret:openai"
autostart = true
restart.max_restarts = 5

[agents.helper]
kind = "hermes"
)",
                                         "f.toml");
  ASSERT_TRUE(parsed.problems.empty()) << Joined(parsed.problems);
  EXPECT_EQ(parsed.spec.name, "team-a");
  ASSERT_EQ(parsed.spec.agents.size(), 2u);
  const FleetAgentSpec& coder = parsed.spec.agents[0];
  EXPECT_EQ(coder.name, "coder-1");
  EXPECT_EQ(coder.line, 4u);
  EXPECT_EQ(coder.manifest, "adapters/codex");
  EXPECT_EQ(coder.state, "running");
  EXPECT_EQ(coder.labels, (Labels{{"team", "a"}, {"tier", "batch"}}));
  std::map<std::string, std::pair<std::string, uint32_t>> config;
  for (const auto& s : coder.config) {
    config[s.key] = {s.value, s.line};
  }
  EXPECT_EQ(config["model"], std::make_pair(std::string("gpt-5"), 10u));
  EXPECT_EQ(config["budget.tokens.per_run"].first, "200000");
  EXPECT_EQ(config["agent.OPENAI_API_KEY"].first, "secret:openai");
  EXPECT_EQ(config["autostart"].first, "true");
  EXPECT_EQ(config["restart.max_restarts"].first, "5");
  EXPECT_EQ(parsed.spec.agents[1].kind, "hermes");
  EXPECT_EQ(parsed.spec.agents[1].state, "");
}

TEST(FleetFile, EveryProblemIsReportedWithItsLine) {
  FleetFileParse parsed = ParseFleetFile(R"([fleet]
name = "team a"
owner = "x"

[agents.Bad_Name]
kind = "mock"

[agents.both]
kind = "mock"
manifest = "x"
state = "paused"
labels = { "ktesio.io/fleet" = "y", ok = "-bad" }

[agents.neither]
labls = {}

[agents.neither.config]
list = [1, 2]

[extra]
)",
                                         "f.toml");
  const std::string all = Joined(parsed.problems);
  for (const char* expected :
       {"f.toml:2: fleet.name 'team a'", "f.toml:3: unknown key 'owner' in [fleet]",
        "f.toml:5: invalid instance name 'Bad_Name'", "f.toml:8: agents.both: give exactly one",
        "f.toml:11: agents.both.state must be", "f.toml:12: agents.both: label 'ktesio.io/fleet'",
        "f.toml:12: agents.both: invalid value '-bad'",
        "f.toml:15: unknown key 'labls' in [agents.neither]; did you mean 'labels'?",
        "f.toml:18: config 'list': expected a string, number or boolean",
        "f.toml:20: unknown key 'extra' in the file"}) {
    EXPECT_NE(all.find(expected), std::string::npos) << expected << "\n" << all;
  }
}

TEST(FleetFile, SyntaxErrorsAndAMissingFleetName) {
  FleetFileParse broken = ParseFleetFile("[fleet\nname = 1\n", "b.toml");
  ASSERT_EQ(broken.problems.size(), 1u);
  EXPECT_NE(broken.problems[0].find("b.toml:1: TOML syntax error"), std::string::npos)
      << broken.problems[0];
  FleetFileParse unnamed = ParseFleetFile("[agents.a]\nkind = \"mock\"\n", "u.toml");
  ASSERT_EQ(unnamed.problems.size(), 1u);
  EXPECT_NE(unnamed.problems[0].find("missing [fleet] name"), std::string::npos);
  FleetFileParse typed = ParseFleetFile("[fleet]\nname = 5\n", "t.toml");
  ASSERT_EQ(typed.problems.size(), 1u) << Joined(typed.problems);  // not "missing" as well
  EXPECT_NE(typed.problems[0].find("t.toml:2: fleet.name: expected a string"), std::string::npos);
  FleetFileParse bad_name =
      ParseFleetFile("[fleet]\nname = \"x\"\n[agents.A]\nkind = \"m\"\n", "n");
  ASSERT_EQ(bad_name.problems.size(), 1u);
  ASSERT_EQ(bad_name.spec.agents.size(), 1u);
  EXPECT_FALSE(bad_name.spec.agents[0].name_valid);  // ktctl does not send it to be judged again
  FleetFileParse duplicate =
      ParseFleetFile("[fleet]\nname=\"x\"\n[agents.a]\nkind=\"m\"\n[agents.a]\nkind=\"m\"\n", "d");
  EXPECT_FALSE(duplicate.problems.empty()) << "a table defined twice is a TOML error";
}

}  // namespace
}  // namespace ktesio::contract
