#include "ktesio/contract/usage_line.h"
#include "ktesio/contract/json.h"
#include "ktesio/contract/text.h"

#include <array>
#include <limits>
#include <optional>

namespace ktesio::contract {

using text::Cat;
using text::Escape;
namespace {

constexpr std::string_view kFields[] = {"sequence", "input_tokens", "output_tokens"};

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A tiny strict parser for the one JSON shape the usage line allows. Each method returns false
// after setting error_.
class UsagePayloadParser {
 public:
  explicit UsagePayloadParser(std::string_view text) : text_(text) {}

  bool Parse(UsageReport& report) {
    SkipSpace();
    if (!Consume('{')) {
      return Fail("payload must be a JSON object starting with '{'");
    }
    std::array<bool, 3> seen = {false, false, false};
    std::array<std::uint64_t*, 3> slots = {&report.sequence, &report.input_tokens,
                                           &report.output_tokens};
    SkipSpace();
    if (!Consume('}')) {
      do {
        SkipSpace();
        std::string key;
        if (!ParseString(key)) {
          return false;
        }
        const std::optional<size_t> field = FieldIndex(key);
        if (!field.has_value()) {
          return Fail(Cat("unexpected field \"", Shown(key), "\""));
        }
        if (seen[*field]) {
          return Fail(Cat("duplicate field \"", key, "\""));
        }
        seen[*field] = true;
        SkipSpace();
        if (!Consume(':')) {
          return Fail(Cat("expected ':' after \"", key, "\""));
        }
        SkipSpace();
        if (!ParseUnsigned(key, *slots[*field])) {
          return false;
        }
        SkipSpace();
      } while (Consume(','));
      if (!Consume('}')) {
        return Fail("expected ',' or '}' in the JSON object");
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) {
      if (!seen[i]) {
        return Fail(Cat("missing field \"", kFields[i], "\""));
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) {
      return Fail("unexpected characters after the JSON object");
    }
    return true;
  }

  const std::string& error() const { return error_; }

 private:
  static std::optional<size_t> FieldIndex(std::string_view key) {
    for (size_t i = 0; i < std::size(kFields); ++i) {
      if (key == kFields[i]) {
        return i;
      }
    }
    return std::nullopt;
  }

  static std::string Shown(std::string_view text) {
    constexpr size_t kMax = 40;
    return Cat(Escape(text.substr(0, kMax)), text.size() > kMax ? "..." : "");
  }

  bool Fail(std::string message) {
    error_ = std::move(message);
    return false;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && IsJsonSpace(text_[pos_])) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    if (!AtEnd() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  // A JSON string (contract/json.h decodes it): escapes are decoded, so "\u0073equence" names
  // "sequence"; \u escapes become UTF-8, unpaired surrogates are rejected.
  bool ParseString(std::string& out) {
    if (Peek() != '"') {
      return Fail("expected a field name in double quotes");
    }
    if (std::string_view error = json::DecodeString(text_, pos_, out); !error.empty()) {
      return Fail(std::string(error));
    }
    return true;
  }

  // A JSON number restricted to non-negative integers that fit 64 bits; other JSON values get
  // a message naming what was found instead.
  bool ParseUnsigned(std::string_view field, std::uint64_t& value) {
    // Built only for an error: this runs three times per usage line.
    auto prefix = [field] { return Cat("field \"", field, "\" "); };
    const char c = Peek();
    if (c == '-') {
      return Fail(prefix() + "must be non-negative");
    }
    if (c < '0' || c > '9') {
      std::string_view found = "an invalid value";
      if (c == '"') {
        found = "a string";
      } else if (c == 'n') {
        found = "null";
      } else if (c == 't' || c == 'f') {
        found = "a boolean";
      } else if (c == '{' || c == '[') {
        found = "an object or array";
      } else if (c == '+' || c == '.') {
        found = "a malformed number";
      }
      return Fail(Cat(prefix(), "must be a non-negative integer, found ", found));
    }
    const size_t start = pos_;
    value = 0;
    bool overflow = false;
    while (!AtEnd() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const std::uint64_t digit = static_cast<std::uint64_t>(text_[pos_] - '0');
      if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
        overflow = true;
      } else {
        value = value * 10 + digit;
      }
      ++pos_;
    }
    if (pos_ - start > 1 && text_[start] == '0') {
      return Fail(prefix() + "has a leading zero");
    }
    if (Peek() == '.' || Peek() == 'e' || Peek() == 'E') {
      return Fail(prefix() + "must be an integer (no fraction or exponent)");
    }
    if (overflow) {
      return Fail(prefix() + "does not fit in 64 bits");
    }
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace

UsageLineResult ParseUsageLine(std::string_view line) {
  UsageLineResult result;
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
    line.remove_prefix(1);
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r' ||
                           line.back() == '\n')) {
    line.remove_suffix(1);
  }
  if (line.substr(0, kUsagePrefix.size()) != kUsagePrefix) {
    return result;
  }
  result.kind = UsageLineKind::kMalformed;
  if (line == kOverlongUsageLine) {
    result.error = "longer than 16 KiB (16384 bytes): a usage line must fit in one log record";
    return result;
  }
  std::string_view rest = line.substr(kUsagePrefix.size());
  if (rest.empty()) {
    result.error = "KTESIO_USAGE without a payload";
    return result;
  }
  if (rest.front() != ' ' && rest.front() != '\t') {
    result.error = "KTESIO_USAGE must be followed by a space or tab, then a JSON object";
    return result;
  }
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) {
    rest.remove_prefix(1);
  }
  UsagePayloadParser parser(rest);
  UsageReport report;
  if (!parser.Parse(report)) {
    result.error = parser.error();
    return result;
  }
  result.kind = UsageLineKind::kUsage;
  result.report = report;
  return result;
}

}  // namespace ktesio::contract
