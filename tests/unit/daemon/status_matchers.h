#pragma once

// Minimal absl::Status helpers for tests (Debian's Abseil ships no status matchers).

#include <string>

#include "absl/status/status.h"
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

}  // namespace ktesio::testing
