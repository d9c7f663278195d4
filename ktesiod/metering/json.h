#pragma once

// A small, strict JSON reader for the metering proxy: just enough of RFC 8259 to read provider
// responses and to rewrite one field of a request body. Every value remembers its byte span in
// the source so a rewrite can splice text without re-serializing (and so without reordering or
// reformatting what the client sent).
//
// Limits: nesting depth 64 (deeper input is rejected, never a stack overflow); numbers are kept
// as their source text. Pure; thread-compatible.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ktesio::daemon::metering::json {

enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

struct Member;

struct Value {
  Kind kind = Kind::kNull;
  bool boolean = false;
  std::string text;             // the decoded string, or a number's source text
  std::vector<Value> items;     // arrays
  std::vector<Member> members;  // objects, in source order
  size_t begin = 0;             // byte span [begin, end) of this value in the source
  size_t end = 0;

  // The member named `key` (the last one when repeated), or nullptr (also for non-objects).
  const Value* Find(std::string_view key) const;
  // Find() along a path of keys.
  const Value* At(std::initializer_list<std::string_view> path) const;
  // A non-negative integer that fits uint64 (no fraction, no exponent), else nullopt.
  std::optional<uint64_t> AsUint() const;
  bool IsNull() const { return kind == Kind::kNull; }
};

struct Member {
  std::string key;
  Value value;
};

// Parses exactly one JSON value (surrounding whitespace allowed). nullopt on any error.
std::optional<Value> Parse(std::string_view text);

}  // namespace ktesio::daemon::metering::json
