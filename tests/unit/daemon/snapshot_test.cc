#include "registry/snapshot.h"

#include "gtest/gtest.h"
#include "ktesio/contract/adapter.h"
#include "ktesio/contract/manifest.h"

namespace ktesio::daemon::registry {
namespace {

constexpr char kManifest[] = R"(contract_version = "1.0.0"
[adapter]
kind = "full"
name = "Full"
[lifecycle.start]
exec = "agent"
args = ["--serve", "x y"]
env = { A = "1", B = "two" }
[lifecycle.stop]
exec = "agent"
args = ["--shutdown"]
[lifecycle.pause]
exec = "agent-pause"
[lifecycle.resume]
exec = "agent-resume"
[capabilities.pause]
linux = "guaranteed"
windows = "best-effort"
[capabilities.interaction]
macos = "guaranteed"
[metering]
source = "engine-observed"
[interaction]
channel = "http"
[config.model]
env = "MODEL"
[config."budget.tokens.per_run"]
flag = "--max-tokens"
[config."agent.THEME"]
file = { path = "config/agent.toml", key = "ui.theme" }
)";

TEST(Snapshot, RoundTripsEveryField) {
  auto declaration = contract::ParseManifest(kManifest, "adapter.toml");
  ASSERT_TRUE(declaration.ok()) << declaration.status();
  v1::AdapterSnapshot snapshot = ToSnapshot(*declaration, false, "/m/adapter.toml");
  EXPECT_EQ(snapshot.capabilities().pause().on_linux(), v1::SUPPORT_LEVEL_GUARANTEED);
  EXPECT_EQ(snapshot.capabilities().pause().on_macos(), v1::SUPPORT_LEVEL_UNSPECIFIED);  // no entry
  EXPECT_EQ(snapshot.capabilities().pause().on_windows(), v1::SUPPORT_LEVEL_BEST_EFFORT);
  EXPECT_EQ(snapshot.channel(), v1::INTERACTION_CHANNEL_HTTP);
  EXPECT_EQ(snapshot.metering_source(), v1::METERING_SOURCE_ENGINE_OBSERVED);
  v1::AdapterSnapshot parsed;
  ASSERT_TRUE(parsed.ParseFromString(snapshot.SerializeAsString()));
  EXPECT_EQ(FromSnapshot(parsed), *declaration);
}

TEST(Snapshot, BuiltinsRoundTrip) {
  for (const std::string& kind : contract::BuiltinKinds()) {
    auto adapter = contract::LoadBuiltinAdapter(kind);
    ASSERT_TRUE(adapter.ok()) << kind;
    v1::AdapterSnapshot snapshot = ToSnapshot((*adapter)->Declaration(), true, "");
    EXPECT_TRUE(snapshot.builtin());
    EXPECT_EQ(FromSnapshot(snapshot), (*adapter)->Declaration()) << kind;
  }
}

TEST(Snapshot, ProjectionIsCurrentOs) {
  auto declaration = contract::ParseManifest(kManifest, "adapter.toml");
  ASSERT_TRUE(declaration.ok());
  v1::ProjectedCapabilities projected = Project(ToSnapshot(*declaration, false, ""));
  EXPECT_EQ(projected.os(), "linux");
  EXPECT_EQ(projected.pause(), v1::SUPPORT_LEVEL_GUARANTEED);
  // No linux entry: the projection is unsupported (the snapshot itself keeps "no entry").
  EXPECT_EQ(projected.interaction(), v1::SUPPORT_LEVEL_UNSUPPORTED);
}

TEST(Snapshot, AdapterJsonHasFullDeclaration) {
  auto declaration = contract::ParseManifest(kManifest, "adapter.toml");
  ASSERT_TRUE(declaration.ok());
  std::string json = RenderAdapterJson(ToSnapshot(*declaration, false, ""));
  for (const char* needle :
       {"\"kind\":\"full\"",
        "\"pause\":{\"linux\":\"guaranteed\",\"macos\":\"unsupported\","
        "\"windows\":\"best-effort\"}",
        "\"metering_source\":\"engine-observed\"", "\"interaction_channel\":\"http\"",
        "\"agent.THEME\":{\"file\":{\"path\":\"config/agent.toml\",\"key\":\"ui.theme\"}}",
        "\"budget.tokens.per_run\":{\"flag\":\"--max-tokens\"}",
        "\"start\":{\"exec\":\"agent\",\"args\":[\"--serve\",\"x y\"],\"env\":{\"A\":\"1\","
        "\"B\":\"two\"}}",
        "\"stop\":{\"exec\":\"agent\""}) {
    EXPECT_NE(json.find(needle), std::string::npos) << needle << "\n" << json;
  }
}

}  // namespace
}  // namespace ktesio::daemon::registry
