#include "config/layers.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing.h"

namespace ktesio::daemon::config {
namespace {

using testing::IsOk;
using testing::StatusIs;
namespace reason = contract::reason;

const Entry* Find(const std::vector<Entry>& entries, std::string_view key) {
  for (const Entry& entry : entries) {
    if (entry.key == key) {
      return &entry;
    }
  }
  return nullptr;
}

TEST(EffectiveTest, EngineDefaultsOnly) {
  std::vector<Entry> entries = Effective(Layers{});
  ASSERT_EQ(entries.size(), 9u);
  const Entry* policy = Find(entries, "restart.policy");
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->value, "on-failure");
  EXPECT_EQ(policy->source, "engine-default");
  EXPECT_EQ(Find(entries, "model"), nullptr);
  for (size_t i = 1; i < entries.size(); ++i) {
    EXPECT_LT(entries[i - 1].key, entries[i].key);
  }
}

struct PrecedenceCase {
  std::string key;
  std::string kind_default;  // "" = not set in that layer
  std::string instance;
  std::string override_value;
  std::string want_value;
  std::string want_source;
};

TEST(EffectiveTest, StrongestLayerWinsPerLeaf) {
  const std::vector<PrecedenceCase> cases = {
      {"restart.policy", "", "", "", "on-failure", "engine-default"},
      {"restart.policy", "always", "", "", "always", "kind-default"},
      {"restart.policy", "always", "never", "", "never", "instance"},
      {"restart.policy", "", "never", "", "never", "instance"},
      {"model", "m-kind", "", "", "m-kind", "kind-default"},
      {"model", "m-kind", "m-inst", "", "m-inst", "instance"},
      {"memory.dir", "", "", "/h/memory", "/h/memory", "invocation-override"},
      {"metering.base_url", "", "", "http://127.0.0.1:1", "http://127.0.0.1:1",
       "invocation-override"},
      {"logs.keep", "7", "", "", "7", "kind-default"},
  };
  for (const PrecedenceCase& c : cases) {
    Layers layers;
    if (!c.kind_default.empty()) {
      layers.kind_default[c.key] = c.kind_default;
    }
    if (!c.instance.empty()) {
      layers.instance[c.key] = c.instance;
    }
    if (!c.override_value.empty()) {
      layers.invocation_override[c.key] = c.override_value;
    }
    std::vector<Entry> entries = Effective(layers);
    const Entry* entry = Find(entries, c.key);
    ASSERT_NE(entry, nullptr) << c.key;
    EXPECT_EQ(entry->value, c.want_value) << c.key;
    EXPECT_EQ(entry->source, c.want_source) << c.key;
  }
}

TEST(EffectiveTest, MergeIsPerLeafWithProvenance) {
  Layers layers;
  layers.kind_default = {{"restart.policy", "always"}, {"restart.max_consecutive", "9"}};
  layers.instance = {
      {"restart.max_consecutive", "3"}, {"agent.FOO", "bar"}, {"model", "secret:MODEL"}};
  layers.invocation_override = {{"memory.dir", "/home/a/memory"}};
  std::vector<Entry> entries = Effective(layers);
  EXPECT_EQ(Find(entries, "restart.policy")->source, "kind-default");
  EXPECT_EQ(Find(entries, "restart.max_consecutive")->value, "3");
  EXPECT_EQ(Find(entries, "restart.max_consecutive")->source, "instance");
  EXPECT_EQ(Find(entries, "restart.backoff_initial_ms")->source, "engine-default");
  EXPECT_TRUE(Find(entries, "agent.FOO")->unvalidated);
  EXPECT_FALSE(Find(entries, "restart.policy")->unvalidated);
  EXPECT_TRUE(Find(entries, "model")->secret_ref);
  EXPECT_FALSE(Find(entries, "agent.FOO")->secret_ref);
  EXPECT_EQ(Find(entries, "memory.dir")->source, "invocation-override");
  EXPECT_EQ(Lookup(entries, "agent.FOO"), "bar");
  EXPECT_FALSE(Lookup(entries, "cost.rate.input").has_value());
}

TEST(ValidateLayerTest, ReservedKeysOnlyInTheInvocationLayer) {
  EXPECT_TRUE(StatusIs(ValidateLayer(Source::kInstance, {{"memory.dir", "/x"}}),
                       absl::StatusCode::kPermissionDenied, reason::kConfigInvalid,
                       "instance layer: config key 'memory.dir' is reserved"));
  EXPECT_TRUE(StatusIs(ValidateLayer(Source::kKindDefault, {{"metering.base_url", "http://x"}}),
                       absl::StatusCode::kPermissionDenied, reason::kConfigInvalid,
                       "kind-default layer"));
  EXPECT_TRUE(StatusIs(ValidateLayer(Source::kInvocationOverride, {{"model", "x"}}),
                       absl::StatusCode::kPermissionDenied, reason::kConfigInvalid,
                       "not engine-reserved"));
  EXPECT_TRUE(IsOk(ValidateLayer(Source::kInvocationOverride, {{"memory.dir", "/x"}})));
  EXPECT_TRUE(
      IsOk(ValidateLayer(Source::kKindDefault, {{"restart.policy", "always"}, {"agent.X", "y"}})));
}

TEST(ValidateLayerTest, RejectsUnknownInvalidAndUnnormalizedValues) {
  EXPECT_TRUE(StatusIs(ValidateLayer(Source::kKindDefault, {{"restart.polcy", "never"}}),
                       absl::StatusCode::kInvalidArgument, reason::kUnknownConfigKey,
                       "did you mean 'restart.policy'?"));
  EXPECT_TRUE(StatusIs(ValidateLayer(Source::kInstance, {{"logs.keep", "0"}}),
                       absl::StatusCode::kInvalidArgument, reason::kConfigInvalid,
                       "between 1 and 100"));
  EXPECT_TRUE(StatusIs(ValidateLayer(Source::kInstance, {{"cost.rate.input", "2.50"}}),
                       absl::StatusCode::kInvalidArgument, reason::kConfigInvalid,
                       "normalized form (expected '2.5')"));
}

TEST(MaskedTest, HidesSecretReferencesOnly) {
  Layers layers;
  layers.instance = {{"model", "secret:M"}, {"agent.TOKEN", "secret:T"}, {"agent.X", "plain"}};
  std::vector<Entry> masked = Masked(Effective(layers));
  EXPECT_EQ(*Lookup(masked, "model"), "secret:****");
  EXPECT_EQ(*Lookup(masked, "agent.TOKEN"), "secret:****");
  EXPECT_EQ(*Lookup(masked, "agent.X"), "plain");
  EXPECT_EQ(*Lookup(masked, "restart.policy"), "on-failure");
}

TEST(EntriesJsonTest, ShapeAndEscaping) {
  std::vector<Entry> entries = {
      Entry{"agent.Q", "a\"b\n", "instance", true, false},
      Entry{"model", "secret:****", "kind-default", false, true},
  };
  EXPECT_EQ(EntriesJson(entries),
            "{\"schema_version\":1,\"entries\":["
            "{\"key\":\"agent.Q\",\"value\":\"a\\\"b\\n\",\"source\":\"instance\","
            "\"unvalidated\":true},"
            "{\"key\":\"model\",\"value\":\"secret:****\",\"source\":\"kind-default\","
            "\"unvalidated\":false}]}");
  EXPECT_EQ(EntriesJson({}), "{\"schema_version\":1,\"entries\":[]}");
}

// product.md §3: numbers are JSON numbers, never strings; booleans likewise. Dollar amounts are
// decimal strings (§6), and a masked secret stays a string whatever the key.
TEST(EntriesJsonTest, NumbersAndBooleansAreTyped) {
  std::vector<Entry> entries = {
      Entry{"autostart", "true", "instance", false, false},
      Entry{"budget.tokens.per_run", "9223372036854775807", "instance", false, false},
      Entry{"cost.rate.input", "2.5", "instance", false, false},
      Entry{"logs.keep", "secret:****", "instance", false, true},
  };
  EXPECT_EQ(EntriesJson(entries),
            "{\"schema_version\":1,\"entries\":["
            "{\"key\":\"autostart\",\"value\":true,\"source\":\"instance\",\"unvalidated\":false},"
            "{\"key\":\"budget.tokens.per_run\",\"value\":9223372036854775807,\"source\":"
            "\"instance\",\"unvalidated\":false},"
            "{\"key\":\"cost.rate.input\",\"value\":\"2.5\",\"source\":\"instance\","
            "\"unvalidated\":false},"
            "{\"key\":\"logs.keep\",\"value\":\"secret:****\",\"source\":\"instance\","
            "\"unvalidated\":false}]}");
}

TEST(SourceNameTest, WireStrings) {
  EXPECT_EQ(SourceName(Source::kEngineDefault), "engine-default");
  EXPECT_EQ(SourceName(Source::kKindDefault), "kind-default");
  EXPECT_EQ(SourceName(Source::kInstance), "instance");
  EXPECT_EQ(SourceName(Source::kInvocationOverride), "invocation-override");
}

}  // namespace
}  // namespace ktesio::daemon::config
