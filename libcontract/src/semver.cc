#include "ktesio/contract/semver.h"

#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/text.h"

namespace ktesio::contract {

using text::Cat;
using text::Escape;
using text::Split;
namespace {

absl::Status Invalid(std::string_view text, std::string_view why) {
  return MakeError(
      absl::StatusCode::kInvalidArgument, reason::kManifestInvalid,
      Cat("invalid version '", Escape(text), "': expected strict semver X.Y.Z (", why, ")"));
}

bool AllDigits(std::string_view s) {
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

// A semver numeric identifier: digits only, no leading zero unless it is exactly "0", and (for
// the version core) small enough for 64 bits. Returns nullopt when any of that fails.
std::optional<std::uint64_t> ParseNumeric(std::string_view s) {
  if (s.empty() || !AllDigits(s) || (s.size() > 1 && s[0] == '0')) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  for (char c : s) {
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
      return std::nullopt;
    }
    value = value * 10 + digit;
  }
  return value;
}

bool IsIdentifierChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-';
}

// Validates a dot-separated list of prerelease (`numeric_rules` set) or build identifiers.
bool ValidIdentifiers(std::string_view list, bool numeric_rules) {
  for (std::string_view id : Split(list, '.')) {
    if (id.empty()) {
      return false;
    }
    for (char c : id) {
      if (!IsIdentifierChar(c)) {
        return false;
      }
    }
    if (numeric_rules && AllDigits(id) && id.size() > 1 && id[0] == '0') {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<SemVer> ParseSemVer(std::string_view text) {
  if (text.empty()) {
    return Invalid(text, "empty");
  }
  if (text[0] == 'v' || text[0] == 'V') {
    return Invalid(text, "no 'v' prefix allowed");
  }
  SemVer version;
  std::string_view core = text;
  if (const size_t plus = core.find('+'); plus != std::string_view::npos) {
    version.build = std::string(core.substr(plus + 1));
    core = core.substr(0, plus);
    if (!ValidIdentifiers(version.build, /*numeric_rules=*/false)) {
      return Invalid(text, "bad build metadata");
    }
  }
  if (const size_t dash = core.find('-'); dash != std::string_view::npos) {
    version.prerelease = std::string(core.substr(dash + 1));
    core = core.substr(0, dash);
    if (!ValidIdentifiers(version.prerelease, /*numeric_rules=*/true)) {
      return Invalid(text, "bad prerelease");
    }
  }
  std::vector<std::string_view> parts = Split(core, '.');
  if (parts.size() != 3) {
    return Invalid(text, "need exactly three numeric parts");
  }
  std::uint64_t* fields[] = {&version.major, &version.minor, &version.patch};
  for (size_t i = 0; i < 3; ++i) {
    std::optional<std::uint64_t> value = ParseNumeric(parts[i]);
    if (!value.has_value()) {
      return Invalid(text, "numeric parts are digits without leading zeros");
    }
    *fields[i] = *value;
  }
  return version;
}

absl::Status NegotiateContractVersion(std::string_view manifest_version) {
  absl::StatusOr<SemVer> version = ParseSemVer(manifest_version);
  if (!version.ok()) {
    return MakeError(absl::StatusCode::kInvalidArgument, reason::kManifestInvalid,
                     Cat("invalid contract_version '", Escape(manifest_version),
                         "': expected strict semver X.Y.Z, e.g. \"", kContractVersion, "\""));
  }
  if (version->major != kContractMajor) {
    return MakeError(absl::StatusCode::kFailedPrecondition, reason::kContractIncompatible,
                     Cat("incompatible adapter contract: manifest declares ", manifest_version,
                         ", engine speaks ", kContractVersion,
                         " \u2014 compatible iff the major versions match (contract v1 "
                         "policy, docs/adapter-contract.md#versioning)"));
  }
  return absl::OkStatus();
}

}  // namespace ktesio::contract
