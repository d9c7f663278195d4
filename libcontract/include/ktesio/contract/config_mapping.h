#pragma once

// Pure rendering of resolved unified config values into an adapter's native mechanisms (the
// declared [config] mapping): environment variables, argv flags and TOML files in the Agent Home.
// The daemon resolves values (layers, secrets) first and performs the actual delivery after.

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ktesio/contract/declaration.h"

namespace ktesio::contract {

// The documented unified config keys, sorted: the only keys besides `agent.<NAME>` pass-through
// keys (NAME a valid environment variable name) that a manifest's [config] may map. The daemon's
// key table (ktesiod/config/keys.cc) holds the same names; a test keeps the two equal.
std::span<const std::string_view> DocumentedConfigKeys();

// Whether a manifest may map `key`: a documented unified key or `agent.<NAME>`.
bool IsMappableConfigKey(std::string_view key);

// What one start delivers, grouped by mechanism.
struct RenderedDelivery {
  // Variable name -> value, for `env` targets and agent.* pass-through keys.
  std::map<std::string, std::string> env;
  // Appended to the start args: two tokens (flag, value) per `flag` target, in unified-key order.
  std::vector<std::string> argv_tail;
  // Relative path (normalized, inside the Agent Home) -> (dotted native key, value) pairs in
  // unified-key order; feed each list to RenderTomlDocument or MergeIntoTomlDocument.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> files;
  // Keys the adapter maps nowhere (delivered nowhere, a silent no-op by contract), sorted.
  std::vector<std::string> unmapped_keys;
  // agent.* pass-through keys whose tail is not a valid env variable name, hence not delivered.
  std::vector<std::string> invalid_passthrough_keys;
};

// Renders `values` (unified key -> resolved string value; when a key repeats, the last value
// wins) through `declaration.config`:
//   env target  -> env[variable] = value
//   flag target -> argv_tail += {flag, value}
//   file target -> files[path] += {native key, value}
//   no mapping, key "agent.<tail>" -> env[<tail>] = value when <tail> is a valid env name
//       ([A-Za-z_][A-Za-z0-9_]*), else invalid_passthrough_keys
//   no mapping otherwise -> unmapped_keys
// Keys are processed in sorted order, and an explicit env mapping wins over a pass-through key
// naming the same variable. Never fails: declaration validity is ParseManifest's job.
RenderedDelivery RenderDelivery(const AdapterDeclaration& declaration,
                                const std::vector<std::pair<std::string, std::string>>& values);

// Renders a TOML document holding each (dotted key, string value), e.g. {"llm.model", "x"} ->
// "[llm]\nmodel = \"x\"\n". Top-level keys come first, then one [table] per parent key; keys
// are emitted sorted; values are TOML basic strings with every control character escaped.
//
// Returns InvalidArgument (reason CONFIG_INVALID) when a key is not a dotted key of bare
// segments, a value is not valid UTF-8, or two keys conflict (equal, or "a.b" and "a.b.c").
absl::StatusOr<std::string> RenderTomlDocument(
    const std::vector<std::pair<std::string, std::string>>& dotted_key_values);

// Like RenderTomlDocument but writes the keys into the TOML document `existing` (the file's
// current content, "" when absent): existing values at the same keys are replaced, everything
// else is kept. The output is re-serialized, so comments and layout are not preserved (the engine
// is the file's sole writer).
//
// Returns InvalidArgument (reason CONFIG_INVALID) when `existing` is not valid TOML (with its
// line:column), for the conditions of RenderTomlDocument, or when a key would have to turn an
// existing non-table value into a table or replace an existing table with a string.
absl::StatusOr<std::string> MergeIntoTomlDocument(
    std::string_view existing,
    const std::vector<std::pair<std::string, std::string>>& dotted_key_values);

// The VAR names of every {env:VAR} placeholder in `value`, in order of first appearance and
// without duplicates. VAR is any non-empty run of characters other than '}', mirroring the
// `\{env:([^}]+)\}` substitution agents use; the daemon fails a start when one is unset in the
// child's environment ({env:VAR} honesty rider).
std::vector<std::string> FindEnvPlaceholders(std::string_view value);

}  // namespace ktesio::contract
