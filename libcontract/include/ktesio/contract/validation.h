#pragma once

// The declaration-level rules every adapter satisfies, whatever its kind. ParseManifest applies
// them with source positions; builtins and persisted registration snapshots are checked with
// ValidateDeclaration.

#include <string_view>

#include "absl/status/status.h"
#include "ktesio/contract/declaration.h"

namespace ktesio::contract {

// True for a portable environment variable name: [A-Za-z_][A-Za-z0-9_]*.
bool IsValidEnvVarName(std::string_view name);

// True for a dotted key made of one or more non-empty bare-key segments ([A-Za-z0-9_-]+) joined
// by '.', e.g. "model", "memory.dir", "llm.model". Used for unified config keys and for the
// native key of a `file` target.
bool IsValidDottedKey(std::string_view key);

// True for a name acceptable as an op template `env` override: non-empty, no '=' and no NUL.
// (Looser than IsValidEnvVarName because adapters may need OS-specific names.)
bool IsValidEnvOverrideName(std::string_view name);

// Checks `declaration` against the contract's declaration rules: non-empty kind and start exec;
// no NUL byte in any exec, arg, env name or env value; valid env override names; a viable
// capability declaration (at least one entry not unsupported); every config key a valid dotted
// key; every config target well-formed (env: IsValidEnvVarName; flag: non-empty, no NUL; file:
// path already in NormalizeHomeRelativePath form, key IsValidDottedKey); no two config keys
// delivered to the same env variable; no two `file` targets on one path whose native keys are
// equal or nested (one is a prefix of the other, segment-wise), since both cannot be written.
//
// Returns OK when all hold, else InvalidArgument (reason MANIFEST_INVALID) naming the first
// violation.
absl::Status ValidateDeclaration(const AdapterDeclaration& declaration);

}  // namespace ktesio::contract
