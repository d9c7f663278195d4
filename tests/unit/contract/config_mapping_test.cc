// RenderDelivery and FindEnvPlaceholders.

#include <string>

#include "config_targets.h"
#include "gtest/gtest.h"
#include "ktesio/contract/config_mapping.h"
#include "ktesio/contract/manifest.h"
#include "manifests.h"
#include "status_testing.h"

namespace ktesio::contract {
namespace {

using ::ktesio::testing::EnvTarget;
using ::ktesio::testing::FileTarget;
using ::ktesio::testing::FlagTarget;
using testing::IsOk;
using Values = std::vector<std::pair<std::string, std::string>>;

// Rendering is pure: any key renders through its target. The mapping is built here rather than
// parsed because a manifest may map only documented keys, and these are rendering cases.
AdapterDeclaration DeclarationWithConfig() {
  absl::StatusOr<AdapterDeclaration> parsed =
      ParseManifest(std::string(ktesio::testing::kMinimalManifest) + R"([config.model]
env = "MODEL"
[config."memory.dir"]
file = { path = "paths.toml", key = "memory" }
[config."agent.OVERRIDE"]
env = "MAPPED_OVERRIDE"
)",
                    "test");
  EXPECT_TRUE(IsOk(parsed));
  AdapterDeclaration declaration = parsed.ok() ? *parsed : AdapterDeclaration{};
  declaration.config["temperature"] = FlagTarget("--temperature");
  declaration.config["effort"] = FlagTarget("--effort");
  declaration.config["llm.endpoint"] = FileTarget("config/agent.toml", "llm.endpoint");
  declaration.config["llm.model"] = FileTarget("config/agent.toml", "llm.model");
  declaration.config["token"] = EnvTarget("TOKEN");
  return declaration;
}

TEST(RenderDeliveryTest, EnvTargets) {
  RenderedDelivery d = RenderDelivery(DeclarationWithConfig(), {{"model", "gpt-x"}});
  EXPECT_EQ(d.env, (std::map<std::string, std::string>{{"MODEL", "gpt-x"}}));
  EXPECT_TRUE(d.argv_tail.empty());
  EXPECT_TRUE(d.files.empty());
  EXPECT_TRUE(d.unmapped_keys.empty());
}

TEST(RenderDeliveryTest, FlagsAreTwoTokensInKeyOrder) {
  RenderedDelivery d =
      RenderDelivery(DeclarationWithConfig(), {{"temperature", "0.2"}, {"effort", "high"}});
  EXPECT_EQ(d.argv_tail, (std::vector<std::string>{"--effort", "high", "--temperature", "0.2"}));
}

TEST(RenderDeliveryTest, FileTargetsAreGroupedPerPath) {
  RenderedDelivery d = RenderDelivery(
      DeclarationWithConfig(),
      {{"llm.model", "m1"}, {"memory.dir", "/home/a/memory"}, {"llm.endpoint", "http://e"}});
  ASSERT_EQ(d.files.size(), 2u);
  EXPECT_EQ(d.files.at("config/agent.toml"),
            (Values{{"llm.endpoint", "http://e"}, {"llm.model", "m1"}}));
  EXPECT_EQ(d.files.at("paths.toml"), (Values{{"memory", "/home/a/memory"}}));
}

TEST(RenderDeliveryTest, AgentPassThroughUsesTheTailVerbatim) {
  RenderedDelivery d =
      RenderDelivery(DeclarationWithConfig(),
                     {{"agent.HERMES_DEBUG", "1"}, {"agent.lower_case", "v"}, {"agent._X9", "y"}});
  EXPECT_EQ(d.env, (std::map<std::string, std::string>{
                       {"HERMES_DEBUG", "1"}, {"lower_case", "v"}, {"_X9", "y"}}));
  EXPECT_TRUE(d.unmapped_keys.empty());
  EXPECT_TRUE(d.invalid_passthrough_keys.empty());
}

TEST(RenderDeliveryTest, InvalidPassThroughTailsAreNotDelivered) {
  RenderedDelivery d =
      RenderDelivery(DeclarationWithConfig(),
                     {{"agent.", "a"}, {"agent.1X", "b"}, {"agent.a.b", "c"}, {"agent.A-B", "d"}});
  EXPECT_TRUE(d.env.empty());
  EXPECT_EQ(d.invalid_passthrough_keys,
            (std::vector<std::string>{"agent.", "agent.1X", "agent.A-B", "agent.a.b"}));
  EXPECT_TRUE(d.unmapped_keys.empty());
}

TEST(RenderDeliveryTest, ExplicitMappingOfAnAgentKeyWins) {
  RenderedDelivery d = RenderDelivery(DeclarationWithConfig(), {{"agent.OVERRIDE", "v"}});
  EXPECT_EQ(d.env, (std::map<std::string, std::string>{{"MAPPED_OVERRIDE", "v"}}));
}

TEST(RenderDeliveryTest, ExplicitEnvMappingBeatsPassThroughOfTheSameVariable) {
  RenderedDelivery d =
      RenderDelivery(DeclarationWithConfig(), {{"model", "mapped"}, {"agent.MODEL", "raw"}});
  EXPECT_EQ(d.env.at("MODEL"), "mapped");
}

TEST(RenderDeliveryTest, UnmappedKeysAreListedSortedAndDeliveredNowhere) {
  RenderedDelivery d =
      RenderDelivery(DeclarationWithConfig(),
                     {{"restart.max", "3"}, {"budget.breach_action", "pause"}, {"model", "m"}});
  EXPECT_EQ(d.unmapped_keys, (std::vector<std::string>{"budget.breach_action", "restart.max"}));
  EXPECT_EQ(d.env.size(), 1u);
}

TEST(RenderDeliveryTest, UnmappedMemoryDirIsDeliveredNowhere) {
  RenderedDelivery d = RenderDelivery(AdapterDeclaration{}, {{"memory.dir", "/m"}});
  EXPECT_TRUE(d.env.empty());
  EXPECT_TRUE(d.files.empty());
  EXPECT_EQ(d.unmapped_keys, std::vector<std::string>{"memory.dir"});
}

TEST(RenderDeliveryTest, LastValueOfARepeatedKeyWins) {
  RenderedDelivery d =
      RenderDelivery(DeclarationWithConfig(), {{"temperature", "1"}, {"temperature", "2"}});
  EXPECT_EQ(d.argv_tail, (std::vector<std::string>{"--temperature", "2"}));
}

TEST(RenderDeliveryTest, EmptyInputRendersNothing) {
  RenderedDelivery d = RenderDelivery(DeclarationWithConfig(), {});
  EXPECT_TRUE(d.env.empty() && d.argv_tail.empty() && d.files.empty() && d.unmapped_keys.empty() &&
              d.invalid_passthrough_keys.empty());
}

TEST(FindEnvPlaceholdersTest, FindsEveryVariable) {
  EXPECT_EQ(FindEnvPlaceholders("{env:API_KEY}"), std::vector<std::string>{"API_KEY"});
  EXPECT_EQ(FindEnvPlaceholders("Bearer {env:A} and {env:B}/{env:A}"),
            (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(FindEnvPlaceholders(R"({"provider":{"key":"{env:OPENAI_API_KEY}"}})"),
            std::vector<std::string>{"OPENAI_API_KEY"});
  EXPECT_EQ(FindEnvPlaceholders("{env:{env:X}}"), std::vector<std::string>{"{env:X"});
  EXPECT_EQ(FindEnvPlaceholders("{env:lower.and-odd}"), std::vector<std::string>{"lower.and-odd"});
}

TEST(FindEnvPlaceholdersTest, IgnoresNonPlaceholders) {
  EXPECT_TRUE(FindEnvPlaceholders("").empty());
  EXPECT_TRUE(FindEnvPlaceholders("plain value").empty());
  EXPECT_TRUE(FindEnvPlaceholders("{env:}").empty());
  EXPECT_TRUE(FindEnvPlaceholders("{env:UNTERMINATED").empty());
  EXPECT_TRUE(FindEnvPlaceholders("{ENV:X}").empty());
  EXPECT_TRUE(FindEnvPlaceholders("$X ${X} env:X").empty());
  EXPECT_EQ(FindEnvPlaceholders("{env:}{env:Y}"), std::vector<std::string>{"Y"});
}

}  // namespace
}  // namespace ktesio::contract
