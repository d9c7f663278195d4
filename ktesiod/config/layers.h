#pragma once

// Layered configuration with provenance (product.md §6). Layers, weakest first:
//   engine-default       the schema's defaults (keys.h), implicit
//   kind-default         the adapter's defaults (builtins may supply some; manifests none)
//   instance             <home>/config.toml (instance_file.h)
//   invocation-override  engine-injected reserved keys (metering.base_url, memory.dir)
// Keys are dotted leaves, so the deep per-leaf merge is a merge by key; each leaf keeps the
// layer it won from. Pure; thread-safe.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace ktesio::daemon::config {

enum class Source { kEngineDefault, kKindDefault, kInstance, kInvocationOverride };

// "engine-default" | "kind-default" | "instance" | "invocation-override" (wire strings).
std::string_view SourceName(Source source);

// Each map: unified key -> value, already validated and normalized (see ValidateLayer).
struct Layers {
  std::map<std::string, std::string> kind_default;
  std::map<std::string, std::string> instance;
  std::map<std::string, std::string> invocation_override;
};

// One effective leaf.
struct Entry {
  std::string key;
  std::string value;         // normalized; a `secret:NAME` reference stays a reference
  std::string source;        // SourceName() of the winning layer
  bool unvalidated = false;  // agent.* pass-through
  bool secret_ref = false;   // value is `secret:NAME`
  bool operator==(const Entry&) const = default;
};

// Checks every key and value of one layer: kind-default and instance hold only operator keys
// (no reserved key), invocation-override only reserved keys. Values must already be in their
// normalized form (ValidateValue output), so a layer read back never changes meaning.
// Errors: the first failure of ValidateValue (UNKNOWN_CONFIG_KEY, CONFIG_INVALID, or
// PERMISSION_DENIED/CONFIG_INVALID for a reserved key in the wrong layer), or
// INVALID_ARGUMENT/CONFIG_INVALID "... is not in normalized form".
// REQUIRES: source != kEngineDefault.
absl::Status ValidateLayer(Source source, const std::map<std::string, std::string>& layer);

// The effective configuration: every key set in any layer or with an engine default, the
// strongest layer winning, sorted by key. Layers are not re-validated (use ValidateLayer).
std::vector<Entry> Effective(const Layers& layers);

// The value of `key` in `entries`, or nullopt.
std::optional<std::string> Lookup(const std::vector<Entry>& entries, std::string_view key);

// `entries` with every secret reference replaced by "secret:****".
std::vector<Entry> Masked(std::vector<Entry> entries);

// {"schema_version":1,"entries":[{"key","value","source","unvalidated"}...]} exactly as given
// (pass Masked() entries for every display; effective-config.json is always masked).
std::string EntriesJson(const std::vector<Entry>& entries);

}  // namespace ktesio::daemon::config
