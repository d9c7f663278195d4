#pragma once

// Status assertions for every test binary (Debian's Abseil ships no status matchers):
//
//   KT_ASSERT_OK(store.Update(row));          EXPECT_TRUE(IsOk(parsed));
//   EXPECT_TRUE(StatusIs(result, absl::StatusCode::kInvalidArgument, reason::kConfigInvalid,
//                        "names the key"));

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "ktesio/contract/error.h"

#define KT_ASSERT_OK(expr)                                 \
  do {                                                     \
    const absl::Status kt_status_ = (expr);                \
    ASSERT_TRUE(kt_status_.ok()) << kt_status_.ToString(); \
  } while (0)

#define KT_EXPECT_OK(expr)                                 \
  do {                                                     \
    const absl::Status kt_status_ = (expr);                \
    EXPECT_TRUE(kt_status_.ok()) << kt_status_.ToString(); \
  } while (0)

namespace ktesio::testing {

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
  if (contract::ErrorReason(status) != reason) {
    return ::testing::AssertionFailure()
           << "reason '" << contract::ErrorReason(status) << "' != expected '" << reason
           << "'; status: " << status.ToString();
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

}  // namespace ktesio::testing
