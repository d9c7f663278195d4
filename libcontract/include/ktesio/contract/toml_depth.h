#pragma once

// A guard run before any TOML text reaches toml++: how deeply the text nests tables.
//
// toml++ walks (and frees) a parsed tree recursively, once per level, and a dotted key costs a
// level per segment: `[config.a.a.a...]` of a few hundred KiB nests hundreds of thousands of
// tables and overflows the stack of whatever parses it. No configuration this project reads
// nests anywhere near kMaxTomlNesting, so deeper text is refused before it is parsed. Pure.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ktesio::contract {

inline constexpr int kMaxTomlNesting = 64;

struct TomlTooDeep {
  uint32_t line = 0;    // 1-based line where the nesting went past the limit
  std::string message;  // "tables nest deeper than 64 levels (...)"
};

// The first place where `text` nests deeper than `max_depth` levels, counting the segments of
// table headers and dotted keys, and each array and inline table a value opens; nullopt when it
// does not. Strings and comments are skipped, so their dots and brackets do not count. Malformed
// text is not judged here (the parser reports it); this only bounds the depth of what would be
// built from it.
std::optional<TomlTooDeep> FindTooDeepNesting(std::string_view text,
                                              int max_depth = kMaxTomlNesting);

}  // namespace ktesio::contract
