#include "ktesio/contract/toml_depth.h"

#include <vector>

#include "ktesio/contract/text.h"

namespace ktesio::contract {
namespace {

// Skips the string starting at text[i] (a quote), counting the lines it spans. Returns the index
// of its last character (the closing quote, or the last one before the text or line ends).
size_t SkipString(std::string_view text, size_t i, uint32_t& line) {
  const char quote = text[i];
  const bool basic = quote == '"';
  if (text.substr(i, 3) == std::string(3, quote)) {  // multi-line: """...""" or '''...'''
    for (size_t j = i + 3; j < text.size(); ++j) {
      if (text[j] == '\n') {
        ++line;
      } else if (basic && text[j] == '\\') {
        if (j + 1 < text.size() && text[j + 1] == '\n') {
          ++line;
        }
        ++j;
      } else if (text[j] == quote && text.substr(j, 3) == std::string(3, quote)) {
        size_t end = j + 2;  // up to two more quotes may belong to the content
        while (end + 1 < text.size() && text[end + 1] == quote && end < j + 4) {
          ++end;
        }
        return end;
      }
    }
    return text.size() - 1;
  }
  for (size_t j = i + 1; j < text.size(); ++j) {
    if (text[j] == '\n') {
      return j - 1;  // unterminated: the parser reports it; the newline is the caller's
    }
    if (basic && text[j] == '\\') {
      ++j;
    } else if (text[j] == quote) {
      return j;
    }
  }
  return text.size() - 1;
}

}  // namespace

std::optional<TomlTooDeep> FindTooDeepNesting(std::string_view text, int max_depth) {
  uint32_t line = 1;
  int header = 0;  // levels of the current table header
  struct Open {
    char kind;  // '[' or '{'
    int depth;  // the depth of the values inside it
  };
  std::vector<Open> open;  // the arrays and inline tables a value has open
  bool line_start = true;  // at the start of a top-level expression
  bool in_key = false;     // reading a (dotted) key
  int key_depth = 0;       // the depth the key's first segment sits at
  int value_depth = 0;     // the depth a value starting now sits at
  auto too_deep = [&](int depth) -> std::optional<TomlTooDeep> {
    if (depth <= max_depth) {
      return std::nullopt;
    }
    return TomlTooDeep{line, text::Cat("tables nest deeper than ", max_depth,
                                       " levels (table headers, dotted keys, arrays and inline "
                                       "tables together)")};
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      if (open.empty()) {
        line_start = true;
        in_key = false;
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      continue;
    }
    if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') {
        ++i;
      }
      continue;
    }
    if (line_start) {
      line_start = false;
      if (c == '[') {  // a table header, [a.b] or [[a.b]]: it sets the depth of what follows
        header = 1;
        size_t j = i + 1;
        for (; j < text.size() && text[j] != ']' && text[j] != '\n'; ++j) {
          if (text[j] == '"' || text[j] == '\'') {
            j = SkipString(text, j, line);
          } else if (text[j] == '.') {
            ++header;
          }
        }
        if (std::optional<TomlTooDeep> deep = too_deep(header)) {
          return deep;
        }
        i = j == text.size() ? j : j - 1;  // the rest of the line: its ']' and a comment
        while (i + 1 < text.size() && text[i + 1] == ']') {
          ++i;
        }
        continue;
      }
      in_key = true;  // a key/value pair
      key_depth = header + 1;
    }
    if (c == '"' || c == '\'') {
      i = SkipString(text, i, line);  // a quoted key segment or a string value
      continue;
    }
    if (in_key) {
      if (c == '.') {
        ++key_depth;
        if (std::optional<TomlTooDeep> deep = too_deep(key_depth)) {
          return deep;
        }
      } else if (c == '=') {
        in_key = false;
        value_depth = key_depth;
      } else if (c == '}' && !open.empty()) {  // an empty inline table, or a trailing ','
        open.pop_back();
        in_key = false;
      }
      continue;
    }
    if (c == '[' || c == '{') {
      open.push_back({c, value_depth + 1});
      if (std::optional<TomlTooDeep> deep = too_deep(value_depth + 1)) {
        return deep;
      }
      if (c == '{') {
        in_key = true;
        key_depth = value_depth + 2;  // the table's keys sit one level below it
      } else {
        value_depth = value_depth + 1;
      }
    } else if (c == ',' && !open.empty()) {
      if (open.back().kind == '{') {
        in_key = true;
        key_depth = open.back().depth + 1;
      } else {
        value_depth = open.back().depth;
      }
    } else if ((c == ']' || c == '}') && !open.empty()) {
      open.pop_back();
      value_depth = open.empty() ? 0 : open.back().depth;
    }
  }
  return std::nullopt;
}

}  // namespace ktesio::contract
