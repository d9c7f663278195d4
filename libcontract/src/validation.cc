#include "ktesio/contract/validation.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/home_path.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/text.h"

namespace ktesio::contract {

using text::Cat;
using text::Escape;
using text::Split;
namespace {

absl::Status Invalid(std::string_view message) {
  return MakeError(absl::StatusCode::kInvalidArgument, reason::kManifestInvalid, message);
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

bool IsBareKeyChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

// Native keys `a` and `b` cannot both be written when equal or when one is a table holding the
// other ("llm" vs "llm.model").
bool NativeKeysConflict(std::string_view a, std::string_view b) {
  if (a.size() > b.size()) {
    std::swap(a, b);
  }
  return a == b || (b.starts_with(a) && b[a.size()] == '.');
}

absl::Status ValidateOp(std::string_view name, const OpTemplate& op) {
  if (op.exec.empty()) {
    return Invalid(Cat("[lifecycle.", name, "] exec must not be empty"));
  }
  if (HasNul(op.exec)) {
    return Invalid(Cat("[lifecycle.", name, "] exec contains a NUL byte"));
  }
  for (const std::string& arg : op.args) {
    if (HasNul(arg)) {
      return Invalid(Cat("[lifecycle.", name, "] args contain a NUL byte"));
    }
  }
  for (const auto& [env_name, value] : op.env) {
    if (!IsValidEnvOverrideName(env_name) || HasNul(value)) {
      return Invalid(Cat("[lifecycle.", name, "] env entry '", Escape(env_name),
                         "' is invalid (names: non-empty, no '=' or NUL; values: no NUL)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTarget(const std::string& key, const ConfigTarget& target) {
  switch (target.kind) {
    case ConfigTarget::Kind::kEnv:
      if (!IsValidEnvVarName(target.env)) {
        return Invalid(Cat("config key '", key, "': env target '", Escape(target.env),
                           "' is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)"));
      }
      return absl::OkStatus();
    case ConfigTarget::Kind::kFlag:
      if (target.flag.empty() || HasNul(target.flag)) {
        return Invalid(
            Cat("config key '", key, "': flag target must be non-empty without NUL bytes"));
      }
      return absl::OkStatus();
    case ConfigTarget::Kind::kFile: {
      absl::StatusOr<std::string> normalized = NormalizeHomeRelativePath(target.file_path);
      if (!normalized.ok()) {
        return Invalid(Cat("config key '", key, "': ", normalized.status().message()));
      }
      if (*normalized != target.file_path) {
        return Invalid(Cat("config key '", key, "': file path '", target.file_path,
                           "' is not normalized (expected '", *normalized, "')"));
      }
      if (!IsValidDottedKey(target.file_key)) {
        return Invalid(Cat("config key '", key, "': file key '", Escape(target.file_key),
                           "' must be a dotted key of bare segments ([A-Za-z0-9_-])"));
      }
      return absl::OkStatus();
    }
  }
  return Invalid(Cat("config key '", key, "': unknown target kind"));
}

absl::Status ValidateConfig(const std::map<std::string, ConfigTarget>& config) {
  std::map<std::string, std::string> env_owner;  // env variable -> unified key
  std::vector<std::pair<std::string, const ConfigTarget*>> files;
  for (const auto& [key, target] : config) {
    if (!IsValidDottedKey(key)) {
      return Invalid(Cat("config key '", Escape(key),
                         "' must be a dotted key of bare segments ([A-Za-z0-9_-])"));
    }
    KT_RETURN_IF_ERROR(ValidateTarget(key, target));
    if (target.kind == ConfigTarget::Kind::kEnv) {
      auto [it, inserted] = env_owner.emplace(target.env, key);
      if (!inserted) {
        return Invalid(Cat("config keys '", it->second, "' and '", key,
                           "' are both delivered to env variable ", target.env));
      }
    } else if (target.kind == ConfigTarget::Kind::kFile) {
      for (const auto& [other_key, other] : files) {
        if (other->file_path == target.file_path &&
            NativeKeysConflict(other->file_key, target.file_key)) {
          return Invalid(Cat("config keys '", other_key, "' and '", key, "' conflict in file '",
                             target.file_path, "': native keys '", other->file_key, "' and '",
                             target.file_key, "'"));
        }
      }
      files.emplace_back(key, &target);
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool IsValidEnvVarName(std::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

bool IsValidDottedKey(std::string_view key) {
  if (key.empty()) {
    return false;
  }
  for (std::string_view segment : Split(key, '.')) {
    if (segment.empty()) {
      return false;
    }
    for (char c : segment) {
      if (!IsBareKeyChar(c)) {
        return false;
      }
    }
  }
  return true;
}

bool IsValidEnvOverrideName(std::string_view name) {
  return !name.empty() && name.find('=') == std::string_view::npos && !HasNul(name);
}

absl::Status ValidateDeclaration(const AdapterDeclaration& declaration) {
  if (declaration.kind.empty()) {
    return Invalid("[adapter] kind must not be empty");
  }
  const std::pair<std::string_view, const OpTemplate*> ops[] = {
      {"start", &declaration.start},
      {"stop", declaration.stop ? &*declaration.stop : nullptr},
      {"pause", declaration.pause ? &*declaration.pause : nullptr},
      {"resume", declaration.resume ? &*declaration.resume : nullptr},
  };
  for (const auto& [name, op] : ops) {
    if (op != nullptr) {
      KT_RETURN_IF_ERROR(ValidateOp(name, *op));
    }
  }
  if (!declaration.capabilities.IsViable()) {
    return Invalid(
        "capability declaration is not viable: every capability is unsupported (or has no entry) "
        "on every OS; declare at least one capability guaranteed or best-effort somewhere");
  }
  return ValidateConfig(declaration.config);
}

}  // namespace ktesio::contract
