#pragma once

// Shared helpers of the config unit tests: the status assertions of tests/support and a real
// temporary directory per test.

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
#include "status_assertions.h"

namespace ktesio::daemon::config::testing {

using ::ktesio::testing::IsOk;
using ::ktesio::testing::Message;
using ::ktesio::testing::StatusIs;

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
