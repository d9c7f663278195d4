#pragma once

// Parsing and validation of adapter.toml manifests (contract v1). Pure: the caller reads the
// file; nothing here touches the filesystem.

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"
#include "ktesio/contract/declaration.h"

namespace ktesio::contract {

// The largest adapter.toml a reader accepts (ktctl, and the daemon when a client names a path):
// a manifest is a few KiB, and a reader must not be led into reading a device or a huge file.
inline constexpr size_t kMaxManifestBytes = 1 << 20;

// Parses and validates the manifest `toml_text`. `source_name` (normally the file path) prefixes
// every error message: "<source_name>:<line>:<column>: <what>" when a position is known (TOML
// syntax errors, wrong types, unknown keys, invalid values, incomplete tables), else
// "<source_name>: <what>".
//
// Check order: TOML syntax; contract_version (present, a string, strict semver, negotiated);
// unknown top-level keys; then the mandatory sections in order [adapter], [lifecycle.start],
// [capabilities], [metering] — the first missing, empty or invalid one is named; then the
// optional [lifecycle.stop|pause|resume], [interaction] and [config.*]; finally the
// cross-key rules of ValidateDeclaration. Unknown keys are rejected at every level, naming the
// key and its table. Config keys spelled nested ([config.memory.dir]) and quoted
// ([config."memory.dir"]) are the same key "memory.dir". File target paths are stored
// normalized (see NormalizeHomeRelativePath); symlink confinement is the daemon's job.
//
// Returns the declaration (contract_version as written) on success.
// Returns InvalidArgument (reason MANIFEST_INVALID) for every schema or syntax violation.
// Returns FailedPrecondition (reason CONTRACT_INCOMPATIBLE) when the contract major differs from
//   kContractMajor, with NegotiateContractVersion's exact message (no source prefix).
absl::StatusOr<AdapterDeclaration> ParseManifest(std::string_view toml_text,
                                                 std::string_view source_name);

}  // namespace ktesio::contract
