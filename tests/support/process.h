#pragma once

// Test support: run a child process with captured output, and wait on conditions with a
// deadline (never sleep-and-hope).

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ktesio::testing {

struct RunResult {
  int exit_code = -1;  // -1 when killed by a signal
  std::string out;
  std::string err;
};

struct RunOptions {
  std::string stdin_text;
  std::vector<std::string> extra_env;  // "NAME=value"
  std::optional<uid_t> uid;            // drop to this uid (and gid) in the child; needs root
  std::optional<gid_t> gid;
  std::chrono::milliseconds timeout{30000};
};

// Runs argv[0] with argv, waits for it (killing it after the timeout), returns its output.
RunResult RunProcess(const std::vector<std::string>& argv, const RunOptions& options = {});

// Polls `condition` until true or the deadline passes. Returns the final value.
bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

// A fresh directory under /tmp with a short name (Unix socket paths are limited to 107 bytes);
// removed recursively on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadFileOrEmpty(const std::string& path);
void WriteFileOrDie(const std::string& path, const std::string& content);

}  // namespace ktesio::testing
