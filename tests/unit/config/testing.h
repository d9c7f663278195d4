#pragma once

// Shared helpers of the config unit tests: status assertions (this Abseil has no status
// matchers) and a real temporary directory per test.

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "ktesio/contract/error.h"

namespace ktesio::daemon::config::testing {

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

// A fresh directory under /tmp, removed with its content at scope exit.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/kt-cfg-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void WriteAll(const std::string& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

inline unsigned ModeOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return 0;
  }
  return st.st_mode & 07777;
}

}  // namespace ktesio::daemon::config::testing
