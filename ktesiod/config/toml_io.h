#pragma once

// Internal: the config library's TOML reading and writing (not part of its API).
//
// Reading flattens a document into typed leaves with source positions; writing renders leaves
// back, grouped into [tables], so instance files and the secrets store share one format code path.
// toml++ is compiled in exactly one translation unit (toml_parse.cc).

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ktesio::daemon::config::internal {

struct TomlLeaf {
  enum class Kind { kString, kInteger, kBoolean, kOther };
  // Key segments from the root ("restart", "policy"); a quoted key is one segment.
  std::vector<std::string> path;
  Kind kind = Kind::kString;
  // kString: the value; kInteger: decimal text; kBoolean: "true"/"false"; kOther: the TOML type
  // name ("float", "array", "date-time", ...).
  std::string text;
  int line = 0;
  int column = 0;
};

// Parses `text` and returns every leaf value (tables, inline tables included, are walked; arrays
// are leaves of kind kOther), in key order. Errors: INVALID_ARGUMENT/CONFIG_INVALID
// "<source>:<line>:<column>: <description>" for a document that is not valid TOML.
absl::StatusOr<std::vector<TomlLeaf>> ParseTomlLeaves(std::string_view text,
                                                      std::string_view source);

// Renders `leaves` as a TOML document: `comment` lines first (each prefixed "# "), then top-level
// keys, then one [table] per parent path, everything sorted. Segments are bare when they can be,
// else quoted; strings are basic strings with control characters escaped.
// Errors: INVALID_ARGUMENT/CONFIG_INVALID for a kOther leaf, invalid UTF-8, or leaves that
// conflict (one path a prefix of another, or equal).
absl::StatusOr<std::string> RenderTomlLeaves(const std::vector<TomlLeaf>& leaves,
                                             const std::vector<std::string>& comment);

// Joins path segments with '.' (for messages and unified keys).
std::string JoinPath(const std::vector<std::string>& path);

}  // namespace ktesio::daemon::config::internal
