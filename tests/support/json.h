#pragma once

// A small JSON reader for tests: parses a document into a tree so tests can assert key sets
// and values of the CLI's --json output.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ktesio::testing {

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  std::string number;  // the literal text, to tell integers from strings
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;  // in document order

  const Json* Find(const std::string& key) const;
  const Json& operator[](const std::string& key) const;  // null Json when missing
  std::vector<std::string> Keys() const;
  bool IsInteger() const;
  long long Int() const;
};

// Returns nullopt on a syntax error.
std::optional<Json> ParseJson(const std::string& text);

}  // namespace ktesio::testing
