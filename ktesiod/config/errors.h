#pragma once

// Internal helpers of the config library (not part of its API): the library's errors, and the
// shared string helpers of ktesio/contract/text.h under the names the library uses.

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/text.h"
#include "ktesio/contract/utf8.h"

namespace ktesio::daemon::config::internal {

using contract::text::Cat;
using contract::text::Escape;
using contract::text::ToAbsl;

inline absl::Status Error(absl::StatusCode code, std::string_view reason,
                          std::string_view message) {
  return contract::MakeError(code, reason, message);
}

inline absl::Status ConfigInvalid(std::string_view message) {
  return contract::MakeError(absl::StatusCode::kInvalidArgument, contract::reason::kConfigInvalid,
                             message);
}

inline absl::Status DeliveryFailed(std::string_view message) {
  return contract::MakeError(absl::StatusCode::kFailedPrecondition,
                             contract::reason::kDeliveryFailed, message);
}

using contract::IsValidUtf8;

}  // namespace ktesio::daemon::config::internal
