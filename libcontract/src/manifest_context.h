#pragma once

// Internal: error plumbing and helpers shared by the manifest section parsers.

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/text.h"
#include "toml.h"

namespace ktesio::contract::internal {

using text::Append;
using text::Cat;
using text::Escape;
using text::Join;

// Formats positioned MANIFEST_INVALID errors for one manifest source.
class ManifestContext {
 public:
  explicit ManifestContext(std::string_view source_name) : source_name_(source_name) {}

  // "<source>:<line>:<column>: <what>", or "<source>: <what>" when `where` has no position.
  absl::Status Error(const toml::source_region& where, std::string_view what) const;
  absl::Status Error(std::string_view what) const;

  // Rejects the first key of `table` (in document order) not in `allowed`:
  // "unknown key 'k' in <where>[: unknown <what>] (allowed: a, b)". `where` is a display such as
  // "[lifecycle]" ("... in [lifecycle]") or "at top level" ("unknown key 'k' at top level").
  absl::Status CheckKeys(const toml::table& table, std::string_view where, std::string_view what,
                         std::initializer_list<std::string_view> allowed) const;

  // `node` as a string, else "<display> must be a string, got <type>".
  absl::StatusOr<std::string> String(const toml::node& node, std::string_view display) const;

  // `node` as a table, else "<display> must be a table, got <type>".
  absl::StatusOr<const toml::table*> Table(const toml::node& node, std::string_view display) const;

 private:
  std::string source_name_;
};

// The entries of `table` in document order (toml++ iterates in key order).
std::vector<std::pair<const toml::key*, const toml::node*>> EntriesInOrder(
    const toml::table& table);

// "string", "integer", "table", ... for error messages.
std::string_view TypeName(const toml::node& node);

// A key as shown in messages: verbatim when printable, C-escaped otherwise, bounded in length.
std::string DisplayKey(std::string_view key);

// The value of `key` in `table` when it is a non-empty string without NUL bytes; otherwise
// "missing mandatory key 'key' in <where>" or a type/emptiness error at the value.
absl::StatusOr<std::string> RequiredString(const ManifestContext& context, const toml::table& table,
                                           std::string_view key, std::string_view where);

// Parses the op template `node` of [lifecycle.<op>]: exec (required), args, env.
absl::StatusOr<OpTemplate> ParseOp(const ManifestContext& context, const toml::node& node,
                                   std::string_view op);

// Parses the optional [config] section (the node under the top-level "config" key).
absl::StatusOr<std::map<std::string, ConfigTarget>> ParseConfigSection(
    const ManifestContext& context, const toml::node& config);

}  // namespace ktesio::contract::internal
