#pragma once

// A small streaming JSON writer (header-only) for the documents Ktesio emits: CLI --json output,
// event payloads, adapter.json and effective-config.json. Numbers are written as JSON numbers
// (never strings), strings are escaped and forced to valid UTF-8 (invalid bytes become U+FFFD).
//
// Not thread-safe; one writer per document.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ktesio/contract/utf8.h"

namespace ktesio::contract {

// Appends `text` to `out` as the body of a JSON string (without quotes).
inline void AppendJsonEscaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t i = 0;
  while (i < text.size()) {
    // Runs of printable ASCII that need no escape are copied at once (the common case).
    size_t plain = i;
    while (plain < text.size()) {
      const auto b = static_cast<unsigned char>(text[plain]);
      if (b < 0x20 || b >= 0x7f || b == '"' || b == '\\') {
        break;
      }
      ++plain;
    }
    if (plain > i) {
      out.append(text.data() + i, plain - i);
      i = plain;
      continue;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        default:
          if (c < 0x20 || c == 0x7f) {
            out += "\\u00";
            out += kHex[c >> 4];
            out += kHex[c & 0xf];
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // Multi-byte sequence: copied when valid, else the byte becomes U+FFFD.
    const size_t len = Utf8SequenceLength(text, i);
    if (len != 0) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
}

class JsonWriter {
 public:
  JsonWriter& BeginObject() {
    Separate();
    out_ += '{';
    first_.push_back(true);
    return *this;
  }
  JsonWriter& EndObject() {
    out_ += '}';
    first_.pop_back();
    return *this;
  }
  JsonWriter& BeginArray() {
    Separate();
    out_ += '[';
    first_.push_back(true);
    return *this;
  }
  JsonWriter& EndArray() {
    out_ += ']';
    first_.pop_back();
    return *this;
  }
  JsonWriter& Key(std::string_view key) {
    Separate();
    out_ += '"';
    AppendJsonEscaped(out_, key);
    out_ += "\":";
    after_key_ = true;
    return *this;
  }
  JsonWriter& String(std::string_view value) {
    Separate();
    out_ += '"';
    AppendJsonEscaped(out_, value);
    out_ += '"';
    return *this;
  }
  JsonWriter& Int(int64_t value) {
    Separate();
    out_ += std::to_string(value);
    return *this;
  }
  JsonWriter& Uint(uint64_t value) {
    Separate();
    out_ += std::to_string(value);
    return *this;
  }
  JsonWriter& Bool(bool value) {
    Separate();
    out_ += value ? "true" : "false";
    return *this;
  }
  JsonWriter& Null() {
    Separate();
    out_ += "null";
    return *this;
  }
  // Inserts an already-serialized JSON value verbatim.
  JsonWriter& Raw(std::string_view json) {
    Separate();
    out_ += json;
    return *this;
  }
  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) {
        out_ += ',';
      }
      first_.back() = false;
    }
  }

  std::string out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace ktesio::contract
