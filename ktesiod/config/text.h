#pragma once

// Internal helpers of the config library (not part of its API).
//
// Debian's Abseil is built with ABSL_OPTION_USE_STD_STRING_VIEW=0, so absl::string_view does not
// convert to or from std::string_view and absl::StrCat rejects std::string_view. These helpers
// concatenate without Abseil and build the library's errors.

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/utf8.h"

namespace ktesio::daemon::config::internal {

// The start-time refusal reason (not yet a constant in contract/error.h).
inline constexpr std::string_view kDeliveryFailed = "DELIVERY_FAILED";

inline absl::string_view ToAbsl(std::string_view s) { return {s.data(), s.size()}; }

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

// C-style escaping (non-printable bytes as \xNN) for quoting untrusted text in messages.
inline std::string Escape(std::string_view s) { return absl::CHexEscape(ToAbsl(s)); }

inline absl::Status Error(absl::StatusCode code, std::string_view reason,
                          std::string_view message) {
  return contract::MakeError(code, reason, message);
}

inline absl::Status ConfigInvalid(std::string_view message) {
  return contract::MakeError(absl::StatusCode::kInvalidArgument, contract::reason::kConfigInvalid,
                             message);
}

inline absl::Status DeliveryFailed(std::string_view message) {
  return contract::MakeError(absl::StatusCode::kFailedPrecondition, kDeliveryFailed, message);
}

using contract::IsValidUtf8;

}  // namespace ktesio::daemon::config::internal
