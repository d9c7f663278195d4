#pragma once

// The schema of unified config keys (product.md §6): every key the engine knows, its value type,
// validator and engine default, plus the agent.<tail> pass-through family and the two
// engine-reserved keys. Pure; thread-safe.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ktesio::daemon::config {

enum class ValueType {
  kString,       // any valid UTF-8 without NUL, <= kMaxValueBytes
  kUnsigned,     // decimal digits only, within [min, max]; a TOML integer on disk
  kEnum,         // one of KeySpec::choices
  kBool,         // "true" | "false"; a TOML boolean on disk
  kDollars,      // decimal dollar amount, exactly representable in integer micro-dollars
  kUrl,          // http:// or https:// URL with a host; no userinfo, fragment or whitespace
  kPassThrough,  // agent.<tail>: any string, unvalidated
  kEnginePath,   // engine-reserved values (a path or URL the engine injects)
};

// How a key's value is stored in <home>/config.toml.
enum class TomlKind { kString, kInteger, kBoolean };

struct KeySpec {
  std::string_view key;
  ValueType type = ValueType::kString;
  // The engine default ("" and has_default false when the key has none).
  std::string_view engine_default;
  bool has_default = false;
  // kUnsigned bounds (inclusive); kDollars: min 1 means "> 0".
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  // kEnum: the accepted spellings.
  std::span<const std::string_view> choices;
  // Whether a `secret:NAME` reference is accepted as the value.
  bool allows_secret = false;
  // Engine-reserved: set only by the engine's invocation-override layer, never by an operator.
  bool reserved = false;
};

inline constexpr std::string_view kPassThroughPrefix = "agent.";
inline constexpr std::string_view kSecretPrefix = "secret:";
// Largest string value accepted for any key (a config value is not a file).
inline constexpr std::size_t kMaxValueBytes = 64 * 1024;
// The longest key (an agent.<NAME> pass-through key included): every documented key is far
// shorter, and a NAME this long is delivered as an environment variable of that name.
inline constexpr std::size_t kMaxKeyBytes = 256;
// Unsigned keys are capped at INT64_MAX: TOML integers and SQLite integers are signed 64-bit.
inline constexpr std::uint64_t kMaxUnsigned = 9223372036854775807ULL;

// Every fixed key (not the agent.* family), sorted by key, reserved keys included.
std::span<const KeySpec> KnownKeys();

// The spec of a fixed key, or nullptr (agent.* keys and unknown keys have none).
const KeySpec* FindKey(std::string_view key);

// True for "agent.<tail>" (any tail; ValidateKey checks the tail).
bool IsPassThroughKey(std::string_view key);

// The TOML type a key's value is stored as (strings for pass-through and unknown keys).
TomlKind TomlKindOf(std::string_view key);

// The JSON type of a displayed value (config get/set --json, effective-config.json): a number or
// a boolean where the key's TOML type is one and `value` is in that form (a masked secret or an
// unvalidated hand edit stays a string); a string otherwise.
TomlKind JsonKindOf(std::string_view key, std::string_view value);

// Who writes a value: operators (config set, the instance file, adapter kind defaults) may not
// touch reserved keys; the engine's invocation-override layer writes only those.
enum class Writer { kOperator, kEngine };

// Checks that `key` is a known key (or a well-formed agent.<tail> whose tail is a valid env var
// name, since it is delivered as that variable) writable by `writer`.
// Errors:
//   INVALID_ARGUMENT/UNKNOWN_CONFIG_KEY for an unknown key, suggesting the nearest known key
//     ("did you mean 'restart.policy'?") when one is close;
//   INVALID_ARGUMENT/CONFIG_INVALID for agent.<tail> with a tail that is not an env var name;
//   PERMISSION_DENIED/CONFIG_INVALID for a reserved key written by an operator ("the engine owns
//     it"), and for a non-reserved key written by the engine.
absl::Status ValidateKey(std::string_view key, Writer writer = Writer::kOperator);

// Validates `value` for `key` (ValidateKey first) and returns its normalized form: unsigned
// integers without leading zeros, dollar amounts in canonical decimal ("2.50" -> "2.5",
// "007" -> "7"), URLs with a lower-case scheme; other values unchanged. A `secret:NAME` value is
// accepted only for keys that allow secrets (model, agent.*), NAME matching IsValidSecretName.
// Errors: those of ValidateKey, else INVALID_ARGUMENT/CONFIG_INVALID naming the key and rule.
absl::StatusOr<std::string> ValidateValue(std::string_view key, std::string_view value,
                                          Writer writer = Writer::kOperator);

// True for a secret name: [A-Za-z0-9_.-]+, 1..128 bytes.
bool IsValidSecretName(std::string_view name);

// The NAME of a `secret:NAME` value, or nullopt when `value` is not a secret reference (a value
// starting with "secret:" whose NAME is invalid is not a reference).
std::optional<std::string_view> SecretRefName(std::string_view value);

// The nearest known operator-settable key to `unknown` by edit distance (transpositions count
// once), or "" when none is reasonably close (distance <= 1 for keys up to 6 bytes, <= 2 up to
// 12, else <= 3). "agnet.X" suggests "agent.X"; a table prefix ("restart") suggests its first key.
std::string SuggestKey(std::string_view unknown);
// The nearest known operator-settable key to `unknown` however far it is, for an unknown key
// with no close suggestion (the error still names one): a key of the deepest table `unknown`
// names ("logs.bogus": a logs.* key), then the smallest edit distance, then key order.
std::string NearestKey(std::string_view unknown);

// Parses a decimal unsigned integer (digits only, no sign, no spaces) no larger than kMaxUnsigned.
// Errors: INVALID_ARGUMENT/CONFIG_INVALID.
absl::StatusOr<std::uint64_t> ParseUnsigned(std::string_view text);

}  // namespace ktesio::daemon::config
