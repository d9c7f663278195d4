#include "config/keys.h"

#include <algorithm>
#include <cctype>

#include "config/errors.h"
#include "config/money.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/validation.h"

namespace ktesio::daemon::config {

using internal::Cat;
using internal::ConfigInvalid;
using internal::Escape;
namespace reason = contract::reason;

namespace {

constexpr std::string_view kBreachActions[] = {"pause", "stop", "warn"};
constexpr std::string_view kRestartPolicies[] = {"never", "on-failure", "always"};

constexpr KeySpec Plain(std::string_view key, ValueType type) {
  KeySpec spec;
  spec.key = key;
  spec.type = type;
  spec.allows_secret = type == ValueType::kString;
  spec.reserved = type == ValueType::kEnginePath;
  return spec;
}

constexpr KeySpec Defaulted(KeySpec spec, std::string_view engine_default) {
  spec.engine_default = engine_default;
  spec.has_default = true;
  return spec;
}

constexpr KeySpec Ranged(std::string_view key, ValueType type, std::uint64_t min,
                         std::uint64_t max) {
  KeySpec spec = Plain(key, type);
  spec.min = min;
  spec.max = max;
  return spec;
}

constexpr KeySpec Enum(std::string_view key, std::span<const std::string_view> choices,
                       std::string_view engine_default) {
  KeySpec spec = Plain(key, ValueType::kEnum);
  spec.choices = choices;
  return Defaulted(spec, engine_default);
}

// Sorted by key (KnownKeys() promises it; FindKey relies on it).
constexpr KeySpec kKeys[] = {
    Defaulted(Plain("autostart", ValueType::kBool), "false"),
    Enum("budget.breach_action", kBreachActions, "pause"),
    Ranged("budget.dollars.cumulative", ValueType::kDollars, 1, 0),
    Ranged("budget.dollars.per_run", ValueType::kDollars, 1, 0),
    Ranged("budget.tokens.cumulative", ValueType::kUnsigned, 1, kMaxUnsigned),
    Ranged("budget.tokens.per_run", ValueType::kUnsigned, 1, kMaxUnsigned),
    Plain("cost.rate.input", ValueType::kDollars),
    Plain("cost.rate.output", ValueType::kDollars),
    Defaulted(Ranged("logs.keep", ValueType::kUnsigned, 1, 100), "3"),
    Defaulted(Ranged("logs.max_bytes", ValueType::kUnsigned, 4096, kMaxUnsigned), "10485760"),
    Plain("memory.dir", ValueType::kEnginePath),
    Plain("metering.base_url", ValueType::kEnginePath),
    Plain("metering.upstream_base_url", ValueType::kUrl),
    Plain("model", ValueType::kString),
    Defaulted(Ranged("restart.backoff_initial_ms", ValueType::kUnsigned, 1, 3600000), "1000"),
    Defaulted(Ranged("restart.backoff_max_ms", ValueType::kUnsigned, 1, kMaxUnsigned), "60000"),
    Defaulted(Ranged("restart.max_consecutive", ValueType::kUnsigned, 1, 1000), "5"),
    Enum("restart.policy", kRestartPolicies, "on-failure"),
    Defaulted(Ranged("restart.reset_after_ms", ValueType::kUnsigned, 1, kMaxUnsigned), "60000"),
};

absl::Status ReservedError(std::string_view key) {
  const std::string_view what = key == "memory.dir"
                                    ? "the managed memory dir, set by `memory attach`"
                                    : "the metering proxy URL, set at each start";
  return internal::Error(absl::StatusCode::kPermissionDenied, reason::kConfigInvalid,
                         Cat("config key '", key, "' is reserved: the engine owns it (", what,
                             ") and it cannot be set by an operator"));
}

absl::Status CheckString(std::string_view key, std::string_view value) {
  if (value.size() > kMaxValueBytes) {
    return ConfigInvalid(Cat("value of '", key, "' is longer than ", kMaxValueBytes, " bytes"));
  }
  if (value.find('\0') != std::string_view::npos) {
    return ConfigInvalid(Cat("value of '", key, "' contains a NUL byte"));
  }
  if (!internal::IsValidUtf8(value)) {
    return ConfigInvalid(Cat("value of '", key, "' is not valid UTF-8"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CheckUnsigned(const KeySpec& spec, std::string_view value) {
  absl::StatusOr<std::uint64_t> number = ParseUnsigned(value);
  if (!number.ok()) {
    return ConfigInvalid(
        Cat("'", spec.key, "' must be a whole number: ", std::string(number.status().message())));
  }
  if (*number < spec.min || *number > spec.max) {
    return ConfigInvalid(
        Cat("'", spec.key, "' must be between ", spec.min, " and ", spec.max, ", got ", *number));
  }
  return std::to_string(*number);
}

absl::StatusOr<std::string> CheckDollars(const KeySpec& spec, std::string_view value) {
  absl::StatusOr<std::int64_t> micros = ParseMicroDollars(value);
  if (!micros.ok()) {
    return ConfigInvalid(Cat("'", spec.key, "': ", std::string(micros.status().message())));
  }
  if (spec.min > 0 && *micros == 0) {
    return ConfigInvalid(Cat("'", spec.key, "' must be greater than 0"));
  }
  return FormatMicroDollars(*micros);
}

absl::StatusOr<std::string> CheckEnum(const KeySpec& spec, std::string_view value) {
  for (std::string_view choice : spec.choices) {
    if (choice == value) {
      return std::string(value);
    }
  }
  std::string list;
  for (std::string_view choice : spec.choices) {
    list += list.empty() ? "" : ", ";
    list += choice;
  }
  return ConfigInvalid(
      Cat("'", spec.key, "' must be one of ", list, ", got '", Escape(value), "'"));
}

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

// Validates the authority of an http(s) URL: host[:port] or [ipv6][:port], no userinfo.
std::string_view CheckAuthority(std::string_view authority) {
  if (authority.find('@') != std::string_view::npos) {
    return "credentials in the URL are not accepted (put them in a secret)";
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos || close == 1) {
      return "malformed IPv6 host";
    }
    for (char c : authority.substr(1, close - 1)) {
      if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')) {
        return "malformed IPv6 host";
      }
    }
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      return "malformed IPv6 host";
    }
    port = rest.empty() ? rest : rest.substr(1);
    if (!rest.empty() && port.empty()) {
      return "empty port";
    }
  } else {
    const size_t colon = authority.find(':');
    const std::string_view host = authority.substr(0, colon);
    if (host.empty()) {
      return "missing host";
    }
    if (!std::all_of(host.begin(), host.end(), IsHostChar)) {
      return "the host may hold only letters, digits, '-', '.' and '_'";
    }
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) {
        return "empty port";
      }
    }
  }
  if (!port.empty()) {
    absl::StatusOr<std::uint64_t> number = ParseUnsigned(port);
    if (!number.ok() || *number < 1 || *number > 65535 || port.size() > 5) {
      return "the port must be a number from 1 to 65535";
    }
  }
  return "";
}

absl::StatusOr<std::string> CheckUrl(const KeySpec& spec, std::string_view value) {
  auto bad = [&](std::string_view why) {
    // Never echo a value that may carry a credential (userinfo or a query string).
    const bool may_hold_secret = value.find_first_of("@?") != std::string_view::npos;
    return ConfigInvalid(Cat("'", spec.key, "' must be an http:// or https:// URL: ", why,
                             may_hold_secret ? "" : Cat(" (got '", Escape(value), "')")));
  };
  for (char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f) {
      return bad("whitespace, control and non-ASCII characters are not allowed");
    }
  }
  const size_t sep = value.find("://");
  std::string scheme(value.substr(0, sep == std::string_view::npos ? 0 : sep));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](char c) { return static_cast<char>(std::tolower(c)); });
  if (scheme != "http" && scheme != "https") {
    return bad("the scheme must be http or https");
  }
  if (value.find('#') != std::string_view::npos) {
    return bad("a fragment ('#') is not allowed");
  }
  const std::string_view rest = value.substr(sep + 3);
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
  if (authority.empty()) {
    return bad("missing host");
  }
  if (std::string_view why = CheckAuthority(authority); !why.empty()) {
    return bad(why);
  }
  return Cat(scheme, "://", rest);
}

absl::StatusOr<std::string> CheckTyped(const KeySpec& spec, std::string_view value) {
  switch (spec.type) {
    case ValueType::kString:
      if (value.empty()) {
        return ConfigInvalid(Cat("'", spec.key, "' must not be empty"));
      }
      return std::string(value);
    case ValueType::kUnsigned:
      return CheckUnsigned(spec, value);
    case ValueType::kEnum:
      return CheckEnum(spec, value);
    case ValueType::kBool:
      if (value != "true" && value != "false") {
        return ConfigInvalid(
            Cat("'", spec.key, "' must be true or false, got '", Escape(value), "'"));
      }
      return std::string(value);
    case ValueType::kDollars:
      return CheckDollars(spec, value);
    case ValueType::kUrl:
      return CheckUrl(spec, value);
    case ValueType::kPassThrough:
      return std::string(value);
    case ValueType::kEnginePath:
      if (value.empty()) {
        return ConfigInvalid(Cat("'", spec.key, "' must not be empty"));
      }
      return std::string(value);
  }
  return ConfigInvalid(Cat("'", spec.key, "' has no validator"));
}

}  // namespace

std::span<const KeySpec> KnownKeys() { return kKeys; }

const KeySpec* FindKey(std::string_view key) {
  auto it = std::lower_bound(std::begin(kKeys), std::end(kKeys), key,
                             [](const KeySpec& spec, std::string_view k) { return spec.key < k; });
  return it != std::end(kKeys) && it->key == key ? &*it : nullptr;
}

bool IsPassThroughKey(std::string_view key) { return key.starts_with(kPassThroughPrefix); }

TomlKind TomlKindOf(std::string_view key) {
  const KeySpec* spec = FindKey(key);
  if (spec == nullptr) {
    return TomlKind::kString;
  }
  switch (spec->type) {
    case ValueType::kUnsigned:
      return TomlKind::kInteger;
    case ValueType::kBool:
      return TomlKind::kBoolean;
    default:
      return TomlKind::kString;
  }
}

TomlKind JsonKindOf(std::string_view key, std::string_view value) {
  switch (TomlKindOf(key)) {
    case TomlKind::kInteger:
      // A JSON number: digits without a leading zero, at most INT64_MAX's 19.
      return !value.empty() && value.size() <= 19 && (value.size() == 1 || value[0] != '0') &&
                     std::all_of(value.begin(), value.end(),
                                 [](char c) { return c >= '0' && c <= '9'; })
                 ? TomlKind::kInteger
                 : TomlKind::kString;
    case TomlKind::kBoolean:
      return value == "true" || value == "false" ? TomlKind::kBoolean : TomlKind::kString;
    case TomlKind::kString:
      break;
  }
  return TomlKind::kString;
}

absl::Status ValidateKey(std::string_view key, Writer writer) {
  if (key.size() > kMaxKeyBytes) {
    // Not echoed: a key this long is no typo to suggest for (and would fill the message).
    return ConfigInvalid(Cat("config key '", Escape(key.substr(0, 24)), "...' is ", key.size(),
                             " bytes long; keys are at most ", kMaxKeyBytes, " bytes"));
  }
  const KeySpec* spec = FindKey(key);
  if (spec != nullptr) {
    if (spec->reserved && writer == Writer::kOperator) {
      return ReservedError(key);
    }
    if (!spec->reserved && writer == Writer::kEngine) {
      return internal::Error(
          absl::StatusCode::kPermissionDenied, reason::kConfigInvalid,
          Cat("config key '", key, "' is not engine-reserved; the invocation layer cannot set it"));
    }
    return absl::OkStatus();
  }
  if (IsPassThroughKey(key) && writer == Writer::kOperator) {
    const std::string_view tail = key.substr(kPassThroughPrefix.size());
    if (!contract::IsValidEnvVarName(tail)) {
      return ConfigInvalid(Cat("pass-through key '", Escape(key),
                               "' must be agent.<NAME> with NAME a valid environment variable "
                               "name ([A-Za-z_][A-Za-z0-9_]*); it is delivered as that variable"));
    }
    return absl::OkStatus();
  }
  std::string message = Cat("unknown config key '", Escape(key), "'");
  if (std::string suggestion = SuggestKey(key); !suggestion.empty()) {
    message += Cat("; did you mean '", Escape(suggestion), "'?");
  } else {
    message += Cat("; the nearest known key is '", Escape(NearestKey(key)),
                   "' (pass-through keys are spelled agent.<ENV_VAR_NAME>)");
  }
  return internal::Error(absl::StatusCode::kInvalidArgument, reason::kUnknownConfigKey, message);
}

absl::StatusOr<std::string> ValidateValue(std::string_view key, std::string_view value,
                                          Writer writer) {
  KT_RETURN_IF_ERROR(ValidateKey(key, writer));
  KT_RETURN_IF_ERROR(CheckString(key, value));
  const KeySpec* spec = FindKey(key);
  const bool allows_secret = spec == nullptr || spec->allows_secret;
  if (value.starts_with(kSecretPrefix)) {
    if (!allows_secret) {
      return ConfigInvalid(Cat("'", key,
                               "' does not accept a secret reference (only model and "
                               "agent.* values may be secret:NAME)"));
    }
    if (!SecretRefName(value).has_value()) {
      return ConfigInvalid(Cat("invalid secret reference for '", key,
                               "': expected secret:NAME with NAME of 1 to 128 characters "
                               "[A-Za-z0-9_.-]"));
    }
    return std::string(value);
  }
  if (spec == nullptr) {
    return std::string(value);
  }
  return CheckTyped(*spec, value);
}

bool IsValidSecretName(std::string_view name) {
  if (name.empty() || name.size() > 128) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

std::optional<std::string_view> SecretRefName(std::string_view value) {
  if (!value.starts_with(kSecretPrefix)) {
    return std::nullopt;
  }
  const std::string_view name = value.substr(kSecretPrefix.size());
  if (!IsValidSecretName(name)) {
    return std::nullopt;
  }
  return name;
}

absl::StatusOr<std::uint64_t> ParseUnsigned(std::string_view text) {
  if (text.empty()) {
    return ConfigInvalid("expected decimal digits, got an empty value");
  }
  std::uint64_t number = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return ConfigInvalid(Cat("expected decimal digits only, got '", Escape(text), "'"));
    }
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (number > (kMaxUnsigned - digit) / 10) {
      return ConfigInvalid(Cat("'", Escape(text), "' is larger than ", kMaxUnsigned));
    }
    number = number * 10 + digit;
  }
  return number;
}

}  // namespace ktesio::daemon::config
