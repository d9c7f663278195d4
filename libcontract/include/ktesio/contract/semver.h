#pragma once

// Strict Semantic Versioning 2.0.0 parsing and the contract-version negotiation gate.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ktesio::contract {

// A parsed semantic version. `prerelease` and `build` hold the text after '-' and '+' (without
// the separator), "" when absent.
struct SemVer {
  std::uint64_t major = 0;
  std::uint64_t minor = 0;
  std::uint64_t patch = 0;
  std::string prerelease;
  std::string build;
  bool operator==(const SemVer&) const = default;
};

// Parses `text` as a strict semver 2.0.0 version: MAJOR.MINOR.PATCH with an optional
// -PRERELEASE and +BUILD suffix. No "v" prefix, no partial versions ("1", "1.0"), no leading
// zeros in numeric parts or numeric prerelease identifiers, no empty identifiers, identifiers
// only of [0-9A-Za-z-], numeric parts must fit 64 bits, no surrounding whitespace.
//
// Returns InvalidArgument (reason MANIFEST_INVALID) naming the value and what is wrong.
absl::StatusOr<SemVer> ParseSemVer(std::string_view text);

// Negotiates a manifest's declared contract_version against kContractVersion: compatible iff the
// major versions match (prerelease and build suffixes are ignored; 0.x is not grandfathered).
//
// Returns OK when compatible.
// Returns InvalidArgument (reason MANIFEST_INVALID) when `manifest_version` is not strict semver;
//   the message names the value and says "expected strict semver X.Y.Z".
// Returns FailedPrecondition (reason CONTRACT_INCOMPATIBLE) on a major mismatch, with exactly:
//   incompatible adapter contract: manifest declares <as written>, engine speaks 1.0.0 —
//   compatible iff the major versions match (contract v1 policy,
//   docs/adapter-contract.md#versioning)
//   (one line; the dash is U+2014).
absl::Status NegotiateContractVersion(std::string_view manifest_version);

}  // namespace ktesio::contract
