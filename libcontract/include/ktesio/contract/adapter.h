#pragma once

// The Adapter interface both adapter kinds implement ("two kinds, one trait"): a native builtin
// declares its AdapterDeclaration in code, a manifest adapter gets it from adapter.toml. The
// engine's supervisor owns the actual lifecycle; an adapter is its declaration.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ktesio/contract/declaration.h"

namespace ktesio::contract {

// Thread-safety: immutable after construction; safe to share across threads.
class Adapter {
 public:
  virtual ~Adapter() = default;
  // The validated declaration. Builtins carry an empty contract_version (they always match the
  // engine they ship with and never negotiate).
  virtual const AdapterDeclaration& Declaration() const = 0;
  // True for a native builtin, false for a manifest adapter.
  virtual bool IsBuiltin() const = 0;
};

// Loads a manifest adapter from adapter.toml text (see ParseManifest for `source_name` and every
// error: InvalidArgument/MANIFEST_INVALID, FailedPrecondition/CONTRACT_INCOMPATIBLE).
absl::StatusOr<std::unique_ptr<Adapter>> LoadManifestAdapter(std::string_view toml_text,
                                                             std::string_view source_name);

// Loads the native builtin `kind`.
// Returns InvalidArgument (reason UNKNOWN_KIND) naming the known kinds when there is none.
absl::StatusOr<std::unique_ptr<Adapter>> LoadBuiltinAdapter(std::string_view kind);

// The builtin kinds, sorted: {"hermes", "mock"}.
std::vector<std::string> BuiltinKinds();

}  // namespace ktesio::contract
