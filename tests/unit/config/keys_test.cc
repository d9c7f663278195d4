#include "config/keys.h"

#include <algorithm>
#include <string>
#include <vector>

#include "config/money.h"
#include "gtest/gtest.h"
#include "ktesio/contract/config_mapping.h"
#include "testing.h"

namespace ktesio::daemon::config {
namespace {

using testing::IsOk;
using testing::StatusIs;
namespace reason = contract::reason;

struct Good {
  std::string key;
  std::string value;
  std::string normalized;
};

TEST(ValidateValueTest, AcceptsAndNormalizesGoodValues) {
  const std::vector<Good> cases = {
      {"model", "gpt-4o", "gpt-4o"},
      {"model", "secret:MODEL_NAME", "secret:MODEL_NAME"},
      {"model", "ünïcode ✓", "ünïcode ✓"},
      {"budget.tokens.per_run", "1", "1"},
      {"budget.tokens.per_run", "0042", "42"},
      {"budget.tokens.cumulative", "9223372036854775807", "9223372036854775807"},
      {"budget.breach_action", "pause", "pause"},
      {"budget.breach_action", "stop", "stop"},
      {"budget.breach_action", "warn", "warn"},
      {"cost.rate.input", "2.50", "2.5"},
      {"cost.rate.input", "0", "0"},
      {"cost.rate.output", "0.000001", "0.000001"},
      {"cost.rate.output", "15", "15"},
      {"cost.rate.output", "007.100", "7.1"},
      {"budget.dollars.per_run", "1.000000", "1"},
      {"budget.dollars.cumulative", "0.01", "0.01"},
      {"metering.upstream_base_url", "https://api.openai.com/v1", "https://api.openai.com/v1"},
      {"metering.upstream_base_url", "HTTP://127.0.0.1:8080", "http://127.0.0.1:8080"},
      {"metering.upstream_base_url", "http://[::1]:11434/api?x=1", "http://[::1]:11434/api?x=1"},
      {"metering.upstream_base_url", "https://proxy.local", "https://proxy.local"},
      {"restart.policy", "never", "never"},
      {"restart.policy", "on-failure", "on-failure"},
      {"restart.policy", "always", "always"},
      {"restart.backoff_initial_ms", "1", "1"},
      {"restart.backoff_initial_ms", "3600000", "3600000"},
      {"restart.backoff_max_ms", "1", "1"},
      {"restart.max_consecutive", "1000", "1000"},
      {"restart.reset_after_ms", "60000", "60000"},
      {"autostart", "true", "true"},
      {"autostart", "false", "false"},
      {"logs.max_bytes", "4096", "4096"},
      {"logs.keep", "1", "1"},
      {"logs.keep", "100", "100"},
      {"agent.FOO", "anything {env:X} goes", "anything {env:X} goes"},
      {"agent._under_score9", "", ""},
      {"agent.TOKEN", "secret:my.token-1", "secret:my.token-1"},
  };
  for (const Good& c : cases) {
    absl::StatusOr<std::string> normalized = ValidateValue(c.key, c.value);
    ASSERT_TRUE(IsOk(normalized)) << c.key << "=" << c.value;
    EXPECT_EQ(*normalized, c.normalized) << c.key << "=" << c.value;
  }
}

struct Bad {
  std::string key;
  std::string value;
  std::string substring;
};

TEST(ValidateValueTest, RejectsBadValuesNamingTheRule) {
  const std::vector<Bad> cases = {
      {"model", "", "must not be empty"},
      {"model", std::string("a\0b", 3), "NUL"},
      {"model", "\xff\xfe", "UTF-8"},
      {"model", std::string(64 * 1024 + 1, 'x'), "longer than"},
      {"model", "secret:", "invalid secret reference"},
      {"model", "secret:bad name", "invalid secret reference"},
      {"model", "secret:" + std::string(129, 'a'), "invalid secret reference"},
      {"budget.tokens.per_run", "0", "between 1 and"},
      {"budget.tokens.per_run", "-1", "digits only"},
      {"budget.tokens.per_run", "+1", "digits only"},
      {"budget.tokens.per_run", " 1", "digits only"},
      {"budget.tokens.per_run", "1e3", "digits only"},
      {"budget.tokens.per_run", "", "empty"},
      {"budget.tokens.cumulative", "9223372036854775808", "larger than"},
      {"budget.tokens.cumulative", "99999999999999999999999", "larger than"},
      {"budget.breach_action", "Pause", "one of pause, stop, warn"},
      {"budget.breach_action", "secret:X", "does not accept a secret reference"},
      {"cost.rate.input", "1.0000001", "more than 6 fraction digits"},
      {"cost.rate.input", "1e3", "no exponent"},
      {"cost.rate.input", "-1", "no sign"},
      {"cost.rate.input", "+1", "no sign"},
      {"cost.rate.input", "$2.50", "'$'"},
      {"cost.rate.input", ".5", "a digit must precede"},
      {"cost.rate.input", "5.", "a digit must follow"},
      {"cost.rate.input", "1,000", "digits only"},
      {"cost.rate.input", "", "empty"},
      {"cost.rate.input", "9223372036854.775808", "too large"},
      {"cost.rate.input", "99999999999999999999", "too large"},
      {"budget.dollars.per_run", "0", "greater than 0"},
      {"budget.dollars.cumulative", "0.000000", "greater than 0"},
      {"metering.upstream_base_url", "ftp://host", "scheme must be http or https"},
      {"metering.upstream_base_url", "api.openai.com", "scheme"},
      {"metering.upstream_base_url", "https://", "missing host"},
      {"metering.upstream_base_url", "https:///v1", "missing host"},
      {"metering.upstream_base_url", "https://user:pw@host/", "credentials"},
      {"metering.upstream_base_url", "https://host/v1#frag", "fragment"},
      {"metering.upstream_base_url", "https://ho st/", "whitespace"},
      {"metering.upstream_base_url", "https://host:0/", "port"},
      {"metering.upstream_base_url", "https://host:65536/", "port"},
      {"metering.upstream_base_url", "https://host:/", "empty port"},
      {"metering.upstream_base_url", "https://[zz]/", "IPv6"},
      {"metering.upstream_base_url", "secret:URL", "does not accept a secret reference"},
      {"restart.policy", "sometimes", "one of never, on-failure, always"},
      {"restart.backoff_initial_ms", "0", "between 1 and 3600000"},
      {"restart.backoff_initial_ms", "3600001", "between 1 and 3600000"},
      {"restart.backoff_max_ms", "0", "between 1 and"},
      {"restart.max_consecutive", "1001", "between 1 and 1000"},
      {"restart.reset_after_ms", "1.5", "digits only"},
      {"autostart", "yes", "true or false"},
      {"autostart", "TRUE", "true or false"},
      {"logs.max_bytes", "4095", "between 4096 and"},
      {"logs.keep", "0", "between 1 and 100"},
      {"logs.keep", "101", "between 1 and 100"},
      {"agent.FOO", "secret:", "invalid secret reference"},
  };
  for (const Bad& c : cases) {
    EXPECT_TRUE(StatusIs(ValidateValue(c.key, c.value), absl::StatusCode::kInvalidArgument,
                         reason::kConfigInvalid, c.substring))
        << c.key << "=" << c.value;
  }
}

// The manifest parser (libcontract) lets adapters map exactly the keys the daemon knows: a key
// added to one table and not the other would be refused at registration or never delivered.
TEST(KnownKeysTest, AreTheKeysAManifestMayMap) {
  std::vector<std::string> daemon;
  for (const KeySpec& spec : KnownKeys()) {
    daemon.emplace_back(spec.key);
  }
  std::vector<std::string> contract(contract::DocumentedConfigKeys().begin(),
                                    contract::DocumentedConfigKeys().end());
  EXPECT_EQ(daemon, contract);
  EXPECT_TRUE(std::is_sorted(contract.begin(), contract.end()));
  EXPECT_TRUE(contract::IsMappableConfigKey("agent.HOME_DIR"));
  EXPECT_FALSE(contract::IsMappableConfigKey("agent.1X"));
  EXPECT_FALSE(contract::IsMappableConfigKey("temperature"));
}

TEST(ValidateKeyTest, PassThroughTailMustBeAnEnvName) {
  for (const char* key : {"agent.", "agent.1ABC", "agent.A-B", "agent.a.b", "agent.A B"}) {
    EXPECT_TRUE(StatusIs(ValidateKey(key), absl::StatusCode::kInvalidArgument,
                         reason::kConfigInvalid, "valid environment variable name"))
        << key;
  }
  EXPECT_TRUE(IsOk(ValidateKey("agent.OPENAI_API_KEY")));
}

// A key has a length limit as a value has: a megabyte-long agent.<NAME> was stored and then made
// every start fail (the environment too large to exec), and could not even be unset from a shell.
TEST(ValidateKeyTest, KeysHaveALengthLimit) {
  const std::string longest = "agent." + std::string(kMaxKeyBytes - 6, 'K');
  EXPECT_TRUE(IsOk(ValidateKey(longest)));
  const std::string huge = "agent." + std::string(1 << 20, 'K');
  absl::Status refused = ValidateKey(huge);
  EXPECT_TRUE(StatusIs(refused, absl::StatusCode::kInvalidArgument, reason::kConfigInvalid,
                       "bytes long; keys are at most 256 bytes"));
  EXPECT_LT(refused.message().size(), 200U) << "the key is echoed";
  EXPECT_TRUE(StatusIs(ValidateKey(longest + "K"), absl::StatusCode::kInvalidArgument,
                       reason::kConfigInvalid, "257 bytes long"));
}

TEST(ValidateKeyTest, ReservedKeysAreOwnedByTheEngine) {
  for (const char* key : {"metering.base_url", "memory.dir"}) {
    EXPECT_TRUE(StatusIs(ValidateValue(key, "/x"), absl::StatusCode::kPermissionDenied,
                         reason::kConfigInvalid, "the engine owns it"))
        << key;
    EXPECT_TRUE(IsOk(ValidateValue(key, "/x", Writer::kEngine))) << key;
  }
  EXPECT_TRUE(StatusIs(ValidateValue("model", "x", Writer::kEngine),
                       absl::StatusCode::kPermissionDenied, reason::kConfigInvalid,
                       "not engine-reserved"));
}

TEST(ValidateKeyTest, UnknownKeysSuggestTheNearestKnownKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"restart.polcy", "did you mean 'restart.policy'?"},
      {"restart.plicy", "did you mean 'restart.policy'?"},
      {"modle", "did you mean 'model'?"},
      {"MODEL", "did you mean 'model'?"},
      {"autostrat", "did you mean 'autostart'?"},
      {"logs.max_byte", "did you mean 'logs.max_bytes'?"},
      {"budget.token.per_run", "did you mean 'budget.tokens.per_run'?"},
      {"cost.rate.inputs", "did you mean 'cost.rate.input'?"},
      {"agnet.FOO", "did you mean 'agent.FOO'?"},
      {"restart", "did you mean 'restart.backoff_initial_ms'?"},
  };
  for (const auto& [key, substring] : cases) {
    EXPECT_TRUE(StatusIs(ValidateKey(key), absl::StatusCode::kInvalidArgument,
                         reason::kUnknownConfigKey, substring))
        << key;
  }
}

TEST(ValidateKeyTest, FarKeysNameTheNearestKeyWithoutGuessing) {
  for (const char* key : {"frobnicate", "x", "completely.unrelated.key", "metering.base"}) {
    absl::Status status = ValidateKey(key);
    EXPECT_TRUE(StatusIs(status, absl::StatusCode::kInvalidArgument, reason::kUnknownConfigKey,
                         "unknown config key"))
        << key;
    EXPECT_EQ(testing::Message(status).find("did you mean"), std::string::npos) << key;
    EXPECT_NE(testing::Message(status).find("; the nearest known key is '"), std::string::npos)
        << testing::Message(status);
  }
  EXPECT_TRUE(StatusIs(ValidateKey("logs.bogus"), absl::StatusCode::kInvalidArgument,
                       reason::kUnknownConfigKey,
                       "unknown config key 'logs.bogus'; the nearest known key is 'logs.keep' "
                       "(pass-through keys are spelled agent.<ENV_VAR_NAME>)"));
  EXPECT_NE(NearestKey("metering.base").find("metering."), std::string::npos)
      << NearestKey("metering.base");
  EXPECT_NE(NearestKey("metering.base"), "metering.base_url") << "reserved: never suggested";
  // Reserved keys are never suggested to operators.
  EXPECT_EQ(SuggestKey("memory.dirs"), "");
}

TEST(KeysTest, TableIsSortedAndDefaultsValidate) {
  std::span<const KeySpec> keys = KnownKeys();
  ASSERT_FALSE(keys.empty());
  for (size_t i = 1; i < keys.size(); ++i) {
    EXPECT_LT(keys[i - 1].key, keys[i].key);
  }
  for (const KeySpec& spec : keys) {
    EXPECT_EQ(FindKey(spec.key), &spec);
    if (spec.has_default) {
      absl::StatusOr<std::string> value = ValidateValue(spec.key, spec.engine_default);
      ASSERT_TRUE(IsOk(value)) << spec.key;
      EXPECT_EQ(*value, spec.engine_default) << spec.key;
    }
  }
  EXPECT_EQ(FindKey("agent.FOO"), nullptr);
  EXPECT_EQ(FindKey("nope"), nullptr);
}

TEST(KeysTest, EngineDefaults) {
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"autostart", "false"},
      {"budget.breach_action", "pause"},
      {"logs.keep", "3"},
      {"logs.max_bytes", "10485760"},
      {"restart.backoff_initial_ms", "1000"},
      {"restart.backoff_max_ms", "60000"},
      {"restart.max_consecutive", "5"},
      {"restart.policy", "on-failure"},
      {"restart.reset_after_ms", "60000"},
  };
  size_t with_default = 0;
  for (const KeySpec& spec : KnownKeys()) {
    with_default += spec.has_default ? 1 : 0;
  }
  EXPECT_EQ(with_default, defaults.size());
  for (const auto& [key, value] : defaults) {
    ASSERT_NE(FindKey(key), nullptr) << key;
    EXPECT_TRUE(FindKey(key)->has_default) << key;
    EXPECT_EQ(FindKey(key)->engine_default, value) << key;
  }
}

TEST(KeysTest, TomlKinds) {
  EXPECT_EQ(TomlKindOf("restart.max_consecutive"), TomlKind::kInteger);
  EXPECT_EQ(TomlKindOf("budget.tokens.per_run"), TomlKind::kInteger);
  EXPECT_EQ(TomlKindOf("autostart"), TomlKind::kBoolean);
  EXPECT_EQ(TomlKindOf("cost.rate.input"), TomlKind::kString);
  EXPECT_EQ(TomlKindOf("agent.X"), TomlKind::kString);
}

TEST(KeysTest, JsonKindsFollowTheKeyAndTheValuesForm) {
  EXPECT_EQ(JsonKindOf("logs.keep", "3"), TomlKind::kInteger);
  EXPECT_EQ(JsonKindOf("logs.keep", "0"), TomlKind::kInteger);
  EXPECT_EQ(JsonKindOf("budget.tokens.per_run", "9223372036854775807"), TomlKind::kInteger);
  // Not a JSON number: a string, never invalid JSON.
  EXPECT_EQ(JsonKindOf("logs.keep", "03"), TomlKind::kString);
  EXPECT_EQ(JsonKindOf("logs.keep", ""), TomlKind::kString);
  EXPECT_EQ(JsonKindOf("logs.keep", "-1"), TomlKind::kString);
  EXPECT_EQ(JsonKindOf("logs.keep", "99999999999999999999"), TomlKind::kString);
  EXPECT_EQ(JsonKindOf("logs.keep", "secret:****"), TomlKind::kString);
  EXPECT_EQ(JsonKindOf("autostart", "false"), TomlKind::kBoolean);
  EXPECT_EQ(JsonKindOf("autostart", "yes"), TomlKind::kString);
  EXPECT_EQ(JsonKindOf("cost.rate.input", "2"), TomlKind::kString);  // a decimal string (§6)
  EXPECT_EQ(JsonKindOf("agent.N", "5"), TomlKind::kString);          // pass-through, verbatim
  EXPECT_EQ(JsonKindOf("model", "true"), TomlKind::kString);
}

TEST(SecretRefTest, Names) {
  EXPECT_EQ(SecretRefName("secret:A.b_c-9"), "A.b_c-9");
  EXPECT_FALSE(SecretRefName("secret:").has_value());
  EXPECT_FALSE(SecretRefName("secret:a/b").has_value());
  EXPECT_FALSE(SecretRefName("Secret:a").has_value());
  EXPECT_FALSE(SecretRefName("plain").has_value());
  EXPECT_TRUE(IsValidSecretName(std::string(128, 'a')));
  EXPECT_FALSE(IsValidSecretName(std::string(129, 'a')));
}

TEST(MoneyTest, ParsesExactMicros) {
  const std::vector<std::pair<std::string, std::int64_t>> cases = {
      {"0", 0},
      {"0.000001", 1},
      {"2.5", 2500000},
      {"2.50", 2500000},
      {"1.000000", 1000000},
      {"15", 15000000},
      {"9223372036854.775807", 9223372036854775807LL},
  };
  for (const auto& [text, micros] : cases) {
    absl::StatusOr<std::int64_t> parsed = ParseMicroDollars(text);
    ASSERT_TRUE(IsOk(parsed)) << text;
    EXPECT_EQ(*parsed, micros) << text;
  }
}

TEST(MoneyTest, RejectsInexactOrOverflowingAmounts) {
  for (const char* text :
       {"1.0000001", "0.0000001", "1e3", "1E3", "-1", "-0", "$1", "1.", ".1", "", "1.2.3", "1 ",
        "0x10", "9223372036854.775808", "9223372036855", "18446744073709551616"}) {
    EXPECT_TRUE(StatusIs(ParseMicroDollars(text), absl::StatusCode::kInvalidArgument,
                         reason::kConfigInvalid, "invalid dollar amount"))
        << text;
  }
}

TEST(MoneyTest, FormatsCanonically) {
  EXPECT_EQ(FormatMicroDollars(0), "0");
  EXPECT_EQ(FormatMicroDollars(1), "0.000001");
  EXPECT_EQ(FormatMicroDollars(2500000), "2.5");
  EXPECT_EQ(FormatMicroDollars(7000000), "7");
  EXPECT_EQ(FormatMicroDollars(1234567), "1.234567");
  EXPECT_EQ(FormatMicroDollars(9223372036854775807LL), "9223372036854.775807");
}

TEST(UnsignedTest, Bounds) {
  EXPECT_EQ(*ParseUnsigned("0"), 0u);
  EXPECT_EQ(*ParseUnsigned("9223372036854775807"), kMaxUnsigned);
  EXPECT_FALSE(ParseUnsigned("9223372036854775808").ok());
  EXPECT_FALSE(ParseUnsigned("18446744073709551616").ok());
  EXPECT_FALSE(ParseUnsigned("").ok());
  EXPECT_FALSE(ParseUnsigned("1_000").ok());
}

}  // namespace
}  // namespace ktesio::daemon::config
