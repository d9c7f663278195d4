#pragma once

// String helpers shared by libcontract, the daemon and the clients: one home for
// concatenation, joining, splitting and escaping.
//
// Debian's Abseil is built with ABSL_OPTION_USE_STD_STRING_VIEW=0, so absl::string_view is a
// distinct type that does not convert to or from std::string_view, and absl::StrCat rejects
// std::string_view arguments. Our public API speaks std::string_view; these helpers bridge.

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace ktesio::contract::text {

inline absl::string_view ToAbsl(std::string_view s) { return {s.data(), s.size()}; }
inline std::string_view ToStd(absl::string_view s) { return {s.data(), s.size()}; }

template <typename T>
void AppendPiece(std::string& out, const T& piece) {
  if constexpr (std::is_same_v<T, char>) {
    out += piece;
  } else if constexpr (std::is_integral_v<T>) {
    out += std::to_string(piece);
  } else if constexpr (std::is_same_v<T, absl::string_view>) {
    out.append(piece.data(), piece.size());
  } else {
    out.append(std::string_view(piece));
  }
}

// Concatenates strings (std or absl views, std::string, literals) and integers.
template <typename... Pieces>
std::string Cat(const Pieces&... pieces) {
  std::string out;
  (AppendPiece(out, pieces), ...);
  return out;
}

template <typename... Pieces>
void Append(std::string& out, const Pieces&... pieces) {
  (AppendPiece(out, pieces), ...);
}

// Joins a range of string-like elements with `separator`.
template <typename Range>
std::string Join(const Range& range, std::string_view separator) {
  std::string out;
  bool first = true;
  for (const auto& element : range) {
    if (!first) {
      out.append(separator);
    }
    first = false;
    AppendPiece(out, element);
  }
  return out;
}

// C-style escaping (non-printable bytes as \xNN) for quoting untrusted text in messages.
inline std::string Escape(std::string_view s) { return absl::CHexEscape(ToAbsl(s)); }

// Untrusted text inside a one-line message meant for a terminal: control bytes (below 0x20, and
// DEL) as \xNN, everything else (quotes, UTF-8) kept, so a message stays one line and an escape
// sequence in a name cannot reach the terminal.
inline std::string EscapeControls(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      constexpr std::string_view kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

// Untrusted text for a log line or a stored record: escaped as Escape does, at most `max_bytes`
// of the original kept, and the cut said ("... (3000000 bytes)").
inline std::string EscapeBounded(std::string_view s, size_t max_bytes) {
  std::string out = Escape(s.substr(0, max_bytes));
  if (s.size() > max_bytes) {
    Append(out, "... (", s.size(), " bytes)");
  }
  return out;
}

// Splits `text` at every `separator`; "" yields one empty piece, like absl::StrSplit.
inline std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    if (end == std::string_view::npos) {
      pieces.push_back(text.substr(start));
      return pieces;
    }
    pieces.push_back(text.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace ktesio::contract::text
