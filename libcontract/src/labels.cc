#include "ktesio/contract/labels.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/text.h"

namespace ktesio::contract {
namespace {

using text::Append;
using text::Cat;

constexpr size_t kMaxName = 63;
constexpr size_t kMaxPrefix = 253;

absl::Status LabelError(std::string_view message) {
  return MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidLabel, message);
}

absl::Status SelectorError(std::string_view text, std::string_view why) {
  return MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidSelector,
                   Cat("invalid selector '", text, "': ", why));
}

bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char separator) {
  std::vector<std::string_view> parts;
  size_t begin = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == separator) {
      parts.push_back(s.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  return parts;
}

// 1..63 characters [A-Za-z0-9._-], alphanumeric at both ends.
bool IsLabelName(std::string_view name) {
  if (name.empty() || name.size() > kMaxName || !IsAlnum(name.front()) || !IsAlnum(name.back())) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A DNS subdomain: dot-separated lowercase labels of [a-z0-9-], alphanumeric at both ends.
bool IsDnsSubdomain(std::string_view prefix) {
  if (prefix.empty() || prefix.size() > kMaxPrefix) {
    return false;
  }
  for (std::string_view part : Split(prefix, '.')) {
    if (part.empty() || part.size() > kMaxName || !IsAlnum(part.front()) || !IsAlnum(part.back())) {
      return false;
    }
    for (char c : part) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
        return false;
      }
    }
  }
  return true;
}

// Printable for messages: control characters and non-ASCII bytes escaped.
std::string Printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 80)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f) {
      constexpr char kHex[] = "0123456789abcdef";
      Append(out, "\\x", kHex[byte >> 4], kHex[byte & 0xf]);
    } else {
      out.push_back(c);
    }
  }
  return text.size() > 80 ? out + "..." : out;
}

}  // namespace

absl::Status ValidateLabelKey(std::string_view key) {
  std::string_view name = key;
  const size_t slash = key.find('/');
  if (slash != std::string_view::npos) {
    const std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (!IsDnsSubdomain(prefix)) {
      return LabelError(Cat("invalid label key '", Printable(key), "': the prefix '",
                            Printable(prefix),
                            "' must be a lowercase DNS subdomain of at most 253 "
                            "characters (e.g. example.com)"));
    }
  }
  if (!IsLabelName(name)) {
    return LabelError(Cat("invalid label key '", Printable(key),
                          "': the name must be 1 to 63 characters [A-Za-z0-9._-], "
                          "beginning and ending with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelValue(std::string_view key, std::string_view value) {
  if (value.empty() || IsLabelName(value)) {
    return absl::OkStatus();
  }
  return LabelError(Cat("invalid value '", Printable(value), "' for label '", Printable(key),
                        "': a value is empty or 1 to 63 characters [A-Za-z0-9._-], "
                        "beginning and ending with a letter or digit"));
}

namespace {

// `text` split on the commas outside parentheses (one level of them at most).
absl::StatusOr<std::vector<std::string_view>> SplitRequirements(std::string_view text) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t begin = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      parts.push_back(text.substr(begin, i - begin));
      begin = i + 1;
    } else if (text[i] == '(') {
      ++depth;
    } else if (text[i] == ')') {
      --depth;
    }
    if (depth < 0 || depth > 1) {
      return SelectorError(Printable(text), "unbalanced parentheses");
    }
  }
  if (depth != 0) {
    return SelectorError(Printable(text), "unbalanced parentheses");
  }
  return parts;
}

}  // namespace

absl::StatusOr<Selector> Selector::Parse(std::string_view text) {
  Selector selector;
  absl::StatusOr<std::vector<std::string_view>> split = SplitRequirements(text);
  if (!split.ok()) {
    return split.status();
  }
  const std::vector<std::string_view>& parts = *split;
  if (parts.size() == 1 && Trim(parts[0]).empty()) {
    return selector;
  }
  for (std::string_view raw : parts) {
    std::string_view part = Trim(raw);
    if (part.empty()) {
      return SelectorError(Printable(text), "empty requirement (stray comma)");
    }
    Requirement req;
    std::string value;
    if (const size_t paren = part.find('('); paren != std::string_view::npos) {
      // k in (a,b) / k notin (a,b)
      if (part.back() != ')') {
        return SelectorError(Printable(part), "expected ')' at the end");
      }
      std::vector<std::string_view> words;
      for (std::string_view word : Split(Trim(part.substr(0, paren)), ' ')) {
        if (!word.empty()) {
          words.push_back(word);
        }
      }
      if (words.size() != 2 || (words[1] != "in" && words[1] != "notin")) {
        return SelectorError(Printable(part), "expected 'KEY in (V1,V2)' or 'KEY notin (V1,V2)'");
      }
      req.key = std::string(words[0]);
      req.op = words[1] == "in" ? Op::kIn : Op::kNotIn;
      const std::string_view inner = part.substr(paren + 1, part.size() - paren - 2);
      if (Trim(inner).empty()) {  // as Kubernetes: the set of an in/notin holds a value at least
        return SelectorError(Printable(part), "the set of values in (...) is empty");
      }
      for (std::string_view v : Split(inner, ',')) {
        req.values.emplace_back(Trim(v));
      }
    } else if (part.front() == '!') {
      req.key = std::string(Trim(part.substr(1)));
      req.op = Op::kNotExists;
    } else if (const size_t ne = part.find("!="); ne != std::string_view::npos) {
      req.key = std::string(Trim(part.substr(0, ne)));
      req.op = Op::kNotEquals;
      req.values.emplace_back(Trim(part.substr(ne + 2)));
    } else if (const size_t eq = part.find('='); eq != std::string_view::npos) {
      std::string_view rest = part.substr(eq + 1);
      if (!rest.empty() && rest.front() == '=') {  // k==v
        rest.remove_prefix(1);
      }
      req.key = std::string(Trim(part.substr(0, eq)));
      req.op = Op::kEquals;
      req.values.emplace_back(Trim(rest));
    } else {
      req.key = std::string(part);
      req.op = Op::kExists;
    }
    if (absl::Status status = ValidateLabelKey(req.key); !status.ok()) {
      return SelectorError(Printable(part), text::ToStd(status.message()));
    }
    for (const std::string& v : req.values) {
      if (absl::Status status = ValidateLabelValue(req.key, v); !status.ok()) {
        return SelectorError(Printable(part), text::ToStd(status.message()));
      }
    }
    selector.requirements_.push_back(std::move(req));
  }
  return selector;
}

bool Selector::Matches(const Labels& labels) const {
  for (const Requirement& req : requirements_) {
    const auto it = labels.find(req.key);
    const bool has = it != labels.end();
    const auto in_values = [&] {
      return has && std::find(req.values.begin(), req.values.end(), it->second) != req.values.end();
    };
    bool ok = false;
    switch (req.op) {
      case Op::kEquals:
      case Op::kIn:
        ok = in_values();
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        ok = !in_values();
        break;
      case Op::kExists:
        ok = has;
        break;
      case Op::kNotExists:
        ok = !has;
        break;
    }
    if (!ok) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<LabelEdit> ParseLabelEdits(const std::vector<std::string>& args) {
  LabelEdit edit;
  for (const std::string& arg : args) {
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      const std::string key = arg.substr(0, eq);
      const std::string value = arg.substr(eq + 1);
      KT_RETURN_IF_ERROR(ValidateLabelKey(key));
      KT_RETURN_IF_ERROR(ValidateLabelValue(key, value));
      edit.set[key] = value;
    } else if (!arg.empty() && arg.back() == '-') {
      const std::string key = arg.substr(0, arg.size() - 1);
      KT_RETURN_IF_ERROR(ValidateLabelKey(key));
      edit.remove.push_back(key);
    } else {
      return LabelError(
          Cat("expected KEY=VALUE to set or KEY- to remove, got '", Printable(arg), "'"));
    }
  }
  for (const std::string& key : edit.remove) {
    if (edit.set.count(key) != 0) {
      return LabelError(Cat("label '", key, "' is both set and removed"));
    }
  }
  return edit;
}

}  // namespace ktesio::contract
