#pragma once

// The one JSON reader of the project: strict RFC 8259, used by the metering proxy (provider
// responses, one field of a request body rewritten in place), the usage line's payload (string
// literals) and the tests. Every value remembers its byte span in
// the source so a rewrite can splice text without re-serializing (and so without reordering or
// reformatting what the client sent).
//
// Limits: nesting depth 64 (deeper input is rejected, never a stack overflow); numbers are kept
// as their source text. Pure; thread-compatible.
//
// Speed: strings are copied a run at a time (sixteen bytes per step find the run's end on
// x86-64), not a character at a time; ParseShallow validates nested values without building them.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ktesio::contract::json {

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

// Parses and validates like Parse (it accepts and rejects exactly the same texts) but builds only
// the root: an object's members (an array's items) have their key, kind, span and scalar value,
// and a container among them is left empty — validated and spanned, not built. For a large
// document of which a few top-level fields matter (a model call's request body, most of it
// conversation): Parse a member's span when its inside is needed.
std::optional<Value> ParseShallow(std::string_view text);

// ParseShallow for a text that arrives in pieces: Advance validates what came since the last call
// and Finish the rest, so that when the last piece arrives little is left to read (the metering
// proxy plans a model call as its body arrives). Only offsets are kept: the text may move as it
// grows, but what it held must stay as it was. Finish(text), for the whole text that Advance saw
// grow, returns exactly what ParseShallow(text) does. Only an object is validated as it arrives
// (a model call's body is one): a text that starts otherwise is left to ParseShallow at Finish.
// Memory: the root's members and at most kMaxDepth open containers, whatever the text holds.
class ShallowScanner {
 public:
  // Validates `text` beyond what earlier calls did, stopping where the text may yet continue (in
  // a number, a literal or an escape that reaches its end).
  void Advance(std::string_view text) { Scan(text, /*whole=*/false); }
  // The whole text: ParseShallow(text). Once: the scanner is spent afterwards.
  std::optional<Value> Finish(std::string_view text);
  // Whether the text seen so far is known to be malformed. A fault near the end of what came
  // (in a number, a literal, or an escape within twelve bytes of it) is judged once what follows
  // it has arrived.
  bool failed() const { return failed_; }

 private:
  // What may come next, after whitespace.
  enum class Expect : uint8_t {
    kRoot,          // the first value
    kKeyOrClose,    // after '{'
    kKey,           // after ',' in an object
    kColon,         // after a key
    kValueOrClose,  // after '['
    kValue,         // after ':', or ',' in an array
    kCommaOrClose,  // after a member or an item
    kEnd,           // after the root: whitespace only
  };
  void Scan(std::string_view text, bool whole);
  // The value at pos_; false when it may continue past the text's end (wait for more).
  bool StartValue(std::string_view text, bool whole);
  // The string whose opening quote is at pos_ (a key of the object being read, or a value).
  void BeginString(bool key);
  void StringDone(std::string_view text);
  void Close();
  // A value of `kind` ended at pos_: a member of the root is kept (a string's text decoded, a
  // number's as written).
  void Completed(std::string_view text, Kind kind, bool boolean);

  Value root_;
  std::vector<char> open_;  // the open containers, '{' or '[', the root first
  Expect expect_ = Expect::kRoot;
  size_t pos_ = 0;  // everything before it is validated
  bool failed_ = false;
  bool fallback_ = false;  // not an object: ParseShallow at Finish
  // The string being validated: its opening quote and where validation resumes.
  bool in_string_ = false;
  bool string_is_key_ = false;
  size_t string_begin_ = 0;
  size_t string_at_ = 0;
  // The number at pos_ that reached the text's end: where the search for its end resumes.
  size_t number_searched_ = 0;
  std::string key_;          // the key of the root's member being read
  size_t member_begin_ = 0;  // where that member's value began
};

// Decodes the JSON string literal whose opening quote is text[pos] into `out`, leaving `pos`
// after the closing quote. Returns "" when it is well formed, else what is wrong with it:
// "unterminated string", "control character in string", "invalid escape in string",
// "truncated \u escape", "invalid \u escape" or "unpaired surrogate in \u escape".
std::string_view DecodeString(std::string_view text, size_t& pos, std::string& out);

}  // namespace ktesio::contract::json
