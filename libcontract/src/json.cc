#include "ktesio/contract/json.h"

#include "ktesio/contract/utf8.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ktesio::contract::json {
namespace {

constexpr int kMaxDepth = 64;

bool Plain(char c) { return c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20; }

#if defined(__SSE2__)
// 0xff in each byte of `bytes` that is '"', '\\' or a control byte (0x00-0x1f), else 0.
__m128i SpecialBytes(__m128i bytes) {
  const __m128i highest_control = _mm_set1_epi8(0x1f);
  // A control byte is one whose unsigned maximum with 0x1f is 0x1f.
  const __m128i control = _mm_cmpeq_epi8(_mm_max_epu8(bytes, highest_control), highest_control);
  return _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8('"')),
                                   _mm_cmpeq_epi8(bytes, _mm_set1_epi8('\\'))),
                      control);
}

// Bit i set when at[i] is special (SpecialBytes), for the 16 bytes at `at`.
uint16_t SpecialBits16(const char* at) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
  return static_cast<uint16_t>(_mm_movemask_epi8(SpecialBytes(bytes)));
}
#endif

// The end of the run of string bytes from `pos` that need no decoding: the first '"', '\\' or
// control character at or after `pos`, or text.size(). Sixteen bytes per step where SSE2 is
// there (every x86-64): the strings of a model call's body are most of its bytes, and a byte at a
// time through the decoder made planning a 64 KiB request cost a quarter of a millisecond.
size_t PlainRunEnd(std::string_view text, size_t pos) {
#if defined(__SSE2__)
  while (text.size() - pos >= 16) {
    if (const uint16_t bits = SpecialBits16(text.data() + pos); bits != 0) {
      return pos + static_cast<size_t>(__builtin_ctz(bits));
    }
    pos += 16;
  }
#endif
  while (pos < text.size() && Plain(text[pos])) {
    ++pos;
  }
  return pos;
}

// The value of each hex digit; 0xff for every other byte.
constexpr std::array<uint8_t, 256> kHexValue = [] {
  std::array<uint8_t, 256> table{};
  table.fill(0xff);
  for (int c = 0; c < 10; ++c) {
    table['0' + c] = static_cast<uint8_t>(c);
  }
  for (int c = 0; c < 6; ++c) {
    table['a' + c] = static_cast<uint8_t>(10 + c);
    table['A' + c] = static_cast<uint8_t>(10 + c);
  }
  return table;
}();

// Four hex digits at text[pos]: "" and the value, or what is wrong. A table and no branch per
// digit: a conversation of non-ASCII text is a \u escape every few words.
std::string_view Hex4(std::string_view text, size_t& pos, uint32_t& value) {
  if (text.size() - pos < 4) {
    return "truncated \\u escape";
  }
  uint32_t digits[4];
  for (size_t i = 0; i < 4; ++i) {
    digits[i] = kHexValue[static_cast<unsigned char>(text[pos + i])];
  }
  pos += 4;
  if (((digits[0] | digits[1] | digits[2] | digits[3]) & 0xf0) != 0) {
    return "invalid \\u escape";
  }
  value = digits[0] << 12 | digits[1] << 8 | digits[2] << 4 | digits[3];
  return "";
}

// The code point of a \u escape after its "\u" (a surrogate pair's, the pair's second escape
// consumed too): "" and `code_point`, or what is wrong.
std::string_view EscapedCodePoint(std::string_view text, size_t& pos, uint32_t& code_point) {
  constexpr std::string_view kUnpaired = "unpaired surrogate in \\u escape";
  if (std::string_view error = Hex4(text, pos, code_point); !error.empty()) {
    return error;
  }
  if (code_point >= 0xDC00 && code_point <= 0xDFFF) {
    return kUnpaired;
  }
  if (code_point >= 0xD800 && code_point <= 0xDBFF) {
    uint32_t low = 0;
    if (text.substr(pos, 2) != "\\u") {
      return kUnpaired;
    }
    pos += 2;
    if (!Hex4(text, pos, low).empty() || low < 0xDC00 || low > 0xDFFF) {
      return kUnpaired;
    }
    code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
  }
  return "";
}

// The string literal whose opening quote is text[pos]: decoded into `out`, `pos` left after the
// closing quote; "" when well formed, else what is wrong (DecodeString's words).
std::string_view ScanString(std::string_view text, size_t& pos, std::string& out) {
  ++pos;  // the opening quote
  while (pos < text.size()) {
    const size_t run_end = PlainRunEnd(text, pos);
    out.append(text.substr(pos, run_end - pos));
    pos = run_end;
    if (pos >= text.size()) {
      break;
    }
    const char c = text[pos++];
    if (c == '"') {
      return "";
    }
    if (c != '\\') {
      return "control character in string";
    }
    if (pos >= text.size()) {
      break;
    }
    const char escape = text[pos++];
    char decoded = 0;
    switch (escape) {
      case '"':
      case '\\':
      case '/':
        decoded = escape;
        break;
      case 'b':
        decoded = '\b';
        break;
      case 'f':
        decoded = '\f';
        break;
      case 'n':
        decoded = '\n';
        break;
      case 'r':
        decoded = '\r';
        break;
      case 't':
        decoded = '\t';
        break;
      case 'u': {
        uint32_t code_point = 0;
        if (std::string_view error = EscapedCodePoint(text, pos, code_point); !error.empty()) {
          return error;
        }
        AppendUtf8(code_point, out);
        continue;
      }
      default:
        return "invalid escape in string";
    }
    out.push_back(decoded);
  }
  return "unterminated string";
}

// What a byte after a backslash makes of it: an escape of its own (\n), the start of a \u escape
// (four hex digits follow), or nothing a string may hold.
enum class EscapeKind : uint8_t { kNone, kSimple, kUnicode };
constexpr std::array<EscapeKind, 256> kEscapeKind = [] {
  std::array<EscapeKind, 256> table{};
  for (const char c : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'}) {
    table[static_cast<unsigned char>(c)] = EscapeKind::kSimple;
  }
  table['u'] = EscapeKind::kUnicode;
  return table;
}();

// The special byte text[at] ('"', '\\' or a control byte) of a string being validated: the string's
// end, a well-formed escape, or something malformed; `after` is left past the quote or escape.
// Inlined into the loops that find the special bytes, with a table instead of a switch: request
// planning steps over every escape of a conversation this way.
enum class Special { kEnd, kEscape, kMalformed };
inline Special SkipSpecial(std::string_view text, size_t at, size_t& after) {
  if (text[at] == '"') {
    after = at + 1;
    return Special::kEnd;
  }
  if (text[at] != '\\' || at + 1 >= text.size()) {
    return Special::kMalformed;  // a control byte, or a backslash that ends the text
  }
  after = at + 2;
  switch (kEscapeKind[static_cast<unsigned char>(text[at + 1])]) {
    case EscapeKind::kSimple:
      return Special::kEscape;
    case EscapeKind::kUnicode: {
      uint32_t code_point = 0;
      return EscapedCodePoint(text, after, code_point).empty() ? Special::kEscape
                                                               : Special::kMalformed;
    }
    case EscapeKind::kNone:
      break;
  }
  return Special::kMalformed;
}

#if defined(__SSE2__)
// Bit i set when at[i] is special (SpecialBytes), for the 64 bytes at `at`.
uint64_t SpecialBits64(const char* at) {
  return uint64_t{SpecialBits16(at)} | uint64_t{SpecialBits16(at + 16)} << 16 |
         uint64_t{SpecialBits16(at + 32)} << 32 | uint64_t{SpecialBits16(at + 48)} << 48;
}
#endif

// How far a string's validation got: its end, the end of the text so far (more may come), or
// something malformed.
enum class StringScan { kEnd, kMore, kBad };

// The longest escape: a surrogate pair, "\uD83D\uDE00".
constexpr size_t kLongestEscape = 12;

// Validates a string literal from `p`, a place inside it (just after its opening quote, or after
// a character or escape already validated), as DecodeString would, decoding nothing. kEnd leaves
// `p` after the closing quote. When `whole` is false the text may still grow: reaching its end,
// or an escape too near it to be judged, is kMore with `p` where validation resumes (never inside
// an escape). Request planning validates a whole model call this way before its first byte goes
// upstream, and an agent's conversation is escapes every few dozen bytes (quotes and newlines of
// code, \u of non-ASCII text): each block of 64 bytes is classified once and every escape in it
// is stepped over from that block's bits.
StringScan ScanStringFrom(std::string_view text, size_t& p, bool whole) {
  const auto too_near = [&](size_t at) { return !whole && text.size() - at < kLongestEscape; };
#if defined(__SSE2__)
  while (text.size() - p >= 64) {
    uint64_t specials = SpecialBits64(text.data() + p);
    size_t next = p + 64;
    while (specials != 0) {
      const size_t at = p + __builtin_ctzll(specials);
      if (too_near(at) && text[at] == '\\') {
        p = at;
        return StringScan::kMore;
      }
      size_t after = 0;
      const Special special = SkipSpecial(text, at, after);
      if (special == Special::kEnd) {
        p = after;
        return StringScan::kEnd;
      }
      if (special == Special::kMalformed) {
        return StringScan::kBad;
      }
      if (after - p >= 64) {  // the escape ran into the next block
        next = after;
        break;
      }
      specials &= ~uint64_t{0} << (after - p);  // the escape's own bytes are stepped over
    }
    p = next;
  }
#endif
  while (p < text.size()) {
    if (Plain(text[p])) {
      ++p;
      continue;
    }
    if (too_near(p) && text[p] == '\\') {
      return StringScan::kMore;
    }
    size_t after = 0;
    const Special special = SkipSpecial(text, p, after);
    if (special == Special::kEnd) {
      p = after;
      return StringScan::kEnd;
    }
    if (special == Special::kMalformed) {
      return StringScan::kBad;
    }
    p = after;
  }
  return whole ? StringScan::kBad : StringScan::kMore;  // unterminated, or not all here yet
}

// Validates the string literal whose opening quote is text[pos] as DecodeString would, decoding
// nothing, and leaves `pos` after its closing quote.
bool SkipString(std::string_view text, size_t& pos) {
  size_t p = pos + 1;  // after the opening quote
  if (ScanStringFrom(text, p, /*whole=*/true) != StringScan::kEnd) {
    return false;
  }
  pos = p;
  return true;
}

bool Digits(std::string_view text, size_t& pos) {
  const size_t start = pos;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    ++pos;
  }
  return pos > start;
}

// Steps over the number at `pos` (RFC 8259's grammar); false when there is none.
bool ScanNumber(std::string_view text, size_t& pos) {
  if (pos < text.size() && text[pos] == '-') {
    ++pos;
  }
  if (pos < text.size() && text[pos] == '0') {
    ++pos;
  } else if (!Digits(text, pos)) {
    return false;
  }
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    if (!Digits(text, pos)) {
      return false;
    }
  }
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    ++pos;
    if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
      ++pos;
    }
    if (!Digits(text, pos)) {
      return false;
    }
  }
  return true;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class Parser {
 public:
  // Containers nested deeper than `build_depth` (the root is depth 0) are validated and spanned
  // but not built.
  Parser(std::string_view text, int build_depth) : text_(text), build_depth_(build_depth) {}

  std::optional<Value> Run() {
    Value value;
    SkipSpace();
    if (!ParseValue(value, 0)) {
      return std::nullopt;
    }
    SkipSpace();
    if (pos_ != text_.size()) {
      return std::nullopt;
    }
    return value;
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  // The ':' after a member's key, with the whitespace around it; false when it is missing.
  bool Colon() {
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != ':') {
      return false;
    }
    ++pos_;
    SkipSpace();
    return true;
  }

  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) {
      return false;
    }
    pos_ += word.size();
    return true;
  }

  bool ParseValue(Value& out, int depth) {
    if (depth > kMaxDepth || pos_ >= text_.size()) {
      return false;
    }
    out.begin = pos_;
    bool ok = false;
    switch (text_[pos_]) {
      case '{':
        if (depth > build_depth_) {
          out.kind = Kind::kObject;
          ok = SkipValue(depth);
        } else {
          ok = ParseObject(out, depth);
        }
        break;
      case '[':
        if (depth > build_depth_) {
          out.kind = Kind::kArray;
          ok = SkipValue(depth);
        } else {
          ok = ParseArray(out, depth);
        }
        break;
      case '"':
        out.kind = Kind::kString;
        ok = ParseString(out.text);
        break;
      case 't':
        out.kind = Kind::kBool;
        out.boolean = true;
        ok = Literal("true");
        break;
      case 'f':
        out.kind = Kind::kBool;
        ok = Literal("false");
        break;
      case 'n':
        ok = Literal("null");
        break;
      default:
        out.kind = Kind::kNumber;
        ok = ParseNumber(out.text);
        break;
    }
    out.end = pos_;
    return ok;
  }

  bool ParseObject(Value& out, int depth) {
    out.kind = Kind::kObject;
    ++pos_;  // '{'
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return true;
    }
    // Room for a small object's members at once (the metering proxy parses a few per call).
    out.members.reserve(4);
    while (true) {
      SkipSpace();
      std::string key;
      if (pos_ >= text_.size() || text_[pos_] != '"' || !ParseString(key) || !Colon()) {
        return false;
      }
      Value member;
      if (!ParseValue(member, depth + 1)) {
        return false;
      }
      out.members.push_back(Member{std::move(key), std::move(member)});
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return false;
    }
  }

  bool ParseArray(Value& out, int depth) {
    out.kind = Kind::kArray;
    ++pos_;  // '['
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      Value item;
      if (!ParseValue(item, depth + 1)) {
        return false;
      }
      out.items.push_back(std::move(item));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return false;
    }
  }

  bool ParseString(std::string& out) { return DecodeString(text_, pos_, out).empty(); }

  // Validates the value at pos_ as ParseValue would, building nothing.
  bool SkipValue(int depth) {
    if (depth > kMaxDepth || pos_ >= text_.size()) {
      return false;
    }
    switch (text_[pos_]) {
      case '{':
      case '[':
        return SkipContainer(depth);
      case '"':
        return SkipString(text_, pos_);
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return ScanNumber();
    }
  }

  bool SkipContainer(int depth) {
    const bool object = text_[pos_] == '{';
    const char close = object ? '}' : ']';
    ++pos_;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == close) {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (object &&
          (pos_ >= text_.size() || text_[pos_] != '"' || !SkipString(text_, pos_) || !Colon())) {
        return false;
      }
      if (!SkipValue(depth + 1)) {
        return false;
      }
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == close) {
        ++pos_;
        return true;
      }
      return false;
    }
  }

  bool ParseNumber(std::string& out) {
    const size_t start = pos_;
    if (!ScanNumber()) {
      return false;
    }
    out.assign(text_.substr(start, pos_ - start));
    return true;
  }

  bool ScanNumber() { return json::ScanNumber(text_, pos_); }

  std::string_view text_;
  const int build_depth_;
  size_t pos_ = 0;
};

}  // namespace

const Value* Value::Find(std::string_view key) const {
  if (kind != Kind::kObject) {
    return nullptr;
  }
  for (auto it = members.rbegin(); it != members.rend(); ++it) {
    if (it->key == key) {
      return &it->value;
    }
  }
  return nullptr;
}

const Value* Value::At(std::initializer_list<std::string_view> path) const {
  const Value* at = this;
  for (std::string_view key : path) {
    at = at->Find(key);
    if (at == nullptr) {
      return nullptr;
    }
  }
  return at;
}

std::optional<uint64_t> Value::AsUint() const {
  if (kind != Kind::kNumber || text.empty() || text[0] == '-' ||
      text.find_first_of(".eE") != std::string::npos) {
    return std::nullopt;
  }
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

std::optional<Value> Parse(std::string_view text) { return Parser(text, INT_MAX).Run(); }

std::optional<Value> ParseShallow(std::string_view text) { return Parser(text, 0).Run(); }

void ShallowScanner::Scan(std::string_view text, bool whole) {
  while (!failed_ && !fallback_) {
    if (in_string_) {
      const StringScan scan = ScanStringFrom(text, string_at_, whole);
      if (scan == StringScan::kMore) {
        return;
      }
      if (scan == StringScan::kBad) {
        failed_ = true;
        return;
      }
      in_string_ = false;
      pos_ = string_at_;
      StringDone(text);
      continue;
    }
    while (pos_ < text.size() && IsSpace(text[pos_])) {
      ++pos_;
    }
    if (pos_ >= text.size()) {
      return;
    }
    const char c = text[pos_];
    switch (expect_) {
      case Expect::kRoot:
        if (c != '{') {
          fallback_ = true;
          return;
        }
        root_.kind = Kind::kObject;
        root_.begin = pos_++;
        root_.members.reserve(4);
        open_.push_back('{');
        expect_ = Expect::kKeyOrClose;
        break;
      case Expect::kKeyOrClose:
      case Expect::kKey:
        if (c == '}' && expect_ == Expect::kKeyOrClose) {
          Close();
        } else if (c == '"') {
          BeginString(/*key=*/true);
        } else {
          failed_ = true;
        }
        break;
      case Expect::kColon:
        if (c != ':') {
          failed_ = true;
          break;
        }
        ++pos_;
        expect_ = Expect::kValue;
        break;
      case Expect::kValueOrClose:
      case Expect::kValue:
        if (c == ']' && expect_ == Expect::kValueOrClose) {
          Close();
        } else if (!StartValue(text, whole)) {
          return;
        }
        break;
      case Expect::kCommaOrClose:
        if (c == ',') {
          ++pos_;
          expect_ = open_.back() == '{' ? Expect::kKey : Expect::kValue;
        } else if (c == (open_.back() == '{' ? '}' : ']')) {
          Close();
        } else {
          failed_ = true;
        }
        break;
      case Expect::kEnd:
        failed_ = true;  // more than one value
        break;
    }
  }
}

bool ShallowScanner::StartValue(std::string_view text, bool whole) {
  // A value inside n open containers is at depth n, as Parser counts (the root at 0).
  if (open_.size() > static_cast<size_t>(kMaxDepth)) {
    failed_ = true;
    return true;
  }
  if (open_.size() == 1) {
    member_begin_ = pos_;
  }
  const char c = text[pos_];
  switch (c) {
    case '{':
    case '[':
      open_.push_back(c);
      ++pos_;
      expect_ = c == '{' ? Expect::kKeyOrClose : Expect::kValueOrClose;
      return true;
    case '"':
      BeginString(/*key=*/false);
      return true;
    case 't':
    case 'f':
    case 'n': {
      const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
      if (text.size() - pos_ < word.size() && !whole) {
        return false;
      }
      if (text.substr(pos_, word.size()) != word) {
        failed_ = true;
        return true;
      }
      pos_ += word.size();
      Completed(text, c == 'n' ? Kind::kNull : Kind::kBool, c == 't');
      return true;
    }
    default: {
      // A number ends at the first byte that cannot continue it: at the text's end, it may go on.
      // Its bytes are looked at once: the search resumes where the last one stopped (a number
      // trickled a byte at a time must not be read from its first digit at every piece).
      size_t end = std::max(pos_, number_searched_);
      while (end < text.size() &&
             ((text[end] >= '0' && text[end] <= '9') || text[end] == '-' || text[end] == '+' ||
              text[end] == '.' || text[end] == 'e' || text[end] == 'E')) {
        ++end;
      }
      if (end == text.size() && !whole) {
        number_searched_ = end;
        return false;
      }
      number_searched_ = 0;
      if (!ScanNumber(text, pos_)) {
        failed_ = true;
        return true;
      }
      Completed(text, Kind::kNumber, false);
      return true;
    }
  }
}

void ShallowScanner::BeginString(bool key) {
  in_string_ = true;
  string_is_key_ = key;
  string_begin_ = pos_;
  string_at_ = pos_ + 1;  // after the opening quote
}

void ShallowScanner::StringDone(std::string_view text) {
  if (!string_is_key_) {
    Completed(text, Kind::kString, false);
    return;
  }
  if (open_.size() == 1) {  // a key of the root's: kept with its member
    key_.clear();
    size_t at = string_begin_;
    failed_ = !DecodeString(text, at, key_).empty();  // validated already: never fails
  }
  expect_ = Expect::kColon;
}

void ShallowScanner::Close() {
  const char closed = open_.back();
  open_.pop_back();
  ++pos_;
  if (open_.empty()) {
    root_.end = pos_;
    expect_ = Expect::kEnd;
    return;
  }
  Completed({}, closed == '{' ? Kind::kObject : Kind::kArray, false);
}

void ShallowScanner::Completed(std::string_view text, Kind kind, bool boolean) {
  expect_ = Expect::kCommaOrClose;
  if (open_.size() != 1) {
    return;  // nested deeper than the root's members: validated, not built
  }
  Value value;
  value.kind = kind;
  value.boolean = boolean;
  value.begin = member_begin_;
  value.end = pos_;
  if (kind == Kind::kString) {
    size_t at = member_begin_;
    failed_ = !DecodeString(text, at, value.text).empty();  // validated already: never fails
  } else if (kind == Kind::kNumber) {
    value.text.assign(text.substr(member_begin_, pos_ - member_begin_));
  }
  root_.members.push_back(Member{std::move(key_), std::move(value)});
  key_.clear();
}

std::optional<Value> ShallowScanner::Finish(std::string_view text) {
  if (expect_ == Expect::kRoot && pos_ == 0) {
    return ParseShallow(text);  // nothing scanned yet: the recursive parse is a little faster
  }
  Scan(text, /*whole=*/true);
  if (fallback_ || expect_ == Expect::kRoot) {
    return ParseShallow(text);
  }
  if (failed_ || in_string_ || expect_ != Expect::kEnd) {
    return std::nullopt;
  }
  return std::move(root_);
}

std::string_view DecodeString(std::string_view text, size_t& pos, std::string& out) {
  return ScanString(text, pos, out);
}

}  // namespace ktesio::contract::json
