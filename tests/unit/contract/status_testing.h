#pragma once

// The shared status assertions (tests/support/status_assertions.h) plus the manifest one.

#include <string_view>

#include "ktesio/contract/error.h"
#include "status_assertions.h"

namespace ktesio::contract::testing {

using ::ktesio::testing::IsOk;
using ::ktesio::testing::Message;
using ::ktesio::testing::StatusIs;

// The common manifest failure: InvalidArgument + MANIFEST_INVALID + a message substring.
template <typename T>
::testing::AssertionResult ManifestInvalid(const T& status, std::string_view substring) {
  return StatusIs(status, absl::StatusCode::kInvalidArgument, reason::kManifestInvalid, substring);
}

}  // namespace ktesio::contract::testing
