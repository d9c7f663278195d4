#pragma once

// Small status assertions (this Abseil has no status matchers).

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "ktesio/contract/error.h"

namespace ktesio::contract::testing {

inline std::string Message(const absl::Status& status) { return std::string(status.message()); }

inline ::testing::AssertionResult IsOk(const absl::Status& status) {
  if (status.ok()) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "status is " << status.ToString();
}

template <typename T>
::testing::AssertionResult IsOk(const absl::StatusOr<T>& status_or) {
  return IsOk(status_or.status());
}

// Checks the code, the stable reason payload and that the message contains `substring`.
inline ::testing::AssertionResult StatusIs(const absl::Status& status, absl::StatusCode code,
                                           std::string_view reason,
                                           std::string_view substring = "") {
  if (status.code() != code) {
    return ::testing::AssertionFailure()
           << "code " << absl::StatusCodeToString(status.code()) << " != expected "
           << absl::StatusCodeToString(code) << "; status: " << status.ToString();
  }
  if (ErrorReason(status) != reason) {
    return ::testing::AssertionFailure() << "reason '" << ErrorReason(status) << "' != expected '"
                                         << reason << "'; status: " << status.ToString();
  }
  if (Message(status).find(substring) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "message '" << Message(status) << "' lacks '" << substring << "'";
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult StatusIs(const absl::StatusOr<T>& status_or, absl::StatusCode code,
                                    std::string_view reason, std::string_view substring = "") {
  if (status_or.ok()) {
    return ::testing::AssertionFailure() << "expected an error, got OK";
  }
  return StatusIs(status_or.status(), code, reason, substring);
}

// The common manifest failure: InvalidArgument + MANIFEST_INVALID + a message substring.
template <typename T>
::testing::AssertionResult ManifestInvalid(const T& status, std::string_view substring) {
  return StatusIs(status, absl::StatusCode::kInvalidArgument, reason::kManifestInvalid, substring);
}

}  // namespace ktesio::contract::testing
