#pragma once

// Helpers for tests that run the real ktesio-shim binary: start it like the daemon does (own
// session, ready pipe), read its files, and wait on observable conditions with a deadline.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ktesio::daemon::shim::testing {

using std::chrono::milliseconds;
inline constexpr milliseconds kDeadline{15000};

// A fresh directory with run/ and log/ inside, removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string run_dir() const { return path_ + "/run"; }
  std::string log_dir() const { return path_ + "/log"; }
  std::string File(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

struct ShimArgs {
  ShimArgs(std::vector<std::string> command_in, std::vector<std::string> flags_in = {},
           std::vector<std::string> extra_env_in = {}, bool ready_fd_in = true)
      : command(std::move(command_in)),
        flags(std::move(flags_in)),
        extra_env(std::move(extra_env_in)),
        ready_fd(ready_fd_in) {}

  std::vector<std::string> command;
  std::vector<std::string> flags;      // Before "--"; --run-dir, --log-dir, --cwd are added.
  std::vector<std::string> extra_env;  // "NAME=VALUE" added to the shim's environment.
  bool ready_fd;                       // Pass a pipe as --ready-fd 5.
  bool reader_gone = false;            // ... whose read end is closed before the shim starts.
};

// The shim, started in its own session with a pipe as --ready-fd 5 (when requested).
class ShimProcess {
 public:
  ShimProcess(const TempDir& dir, const ShimArgs& args);
  ~ShimProcess();
  ShimProcess(const ShimProcess&) = delete;
  ShimProcess& operator=(const ShimProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The handshake: everything written to the ready fd until EOF, or nullopt on timeout.
  std::optional<std::string> ReadyText(milliseconds timeout = kDeadline);
  // The raw wait status, or nullopt on timeout.
  std::optional<int> Wait(milliseconds timeout = kDeadline);

 private:
  pid_t pid_ = -1;
  int ready_fd_ = -1;
  bool reaped_ = false;
};

struct Record {
  std::string timestamp;
  std::string stream;
  std::string text;
};

bool WaitUntil(const std::function<bool()>& condition, milliseconds timeout = kDeadline);
std::optional<std::string> ReadFile(const std::string& path);
// All retained segments of `log_dir`, concatenated in sequence order.
std::string ReadLog(const std::string& log_dir);
// Parses "<ts> <stream> <text>\n" records; a malformed record fails the calling test.
std::vector<Record> ParseRecords(std::string_view log);
std::vector<std::string> SplitLines(std::string_view text);
// Field `index` (0-based, after the command) of /proc/<pid>/stat, or "" if unreadable.
std::string ProcStat(pid_t pid, int index);
// True once `pid` no longer runs (gone, or a zombie nobody reaped yet).
bool IsDead(pid_t pid);

}  // namespace ktesio::daemon::shim::testing
