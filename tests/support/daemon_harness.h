#pragma once

// Starts the real ktesiod binary on a short temp socket and state dir, waits until it answers,
// and stops it. Its stderr goes to a file that the test prints only when it failed.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "process.h"

namespace ktesio::testing {

// Paths of the binaries under test (set by CMake).
std::string KtesiodPath();
std::string KtctlPath();
std::string ProbePath();

class DaemonHarness {
 public:
  // Creates a fresh temp dir; does not start anything yet.
  DaemonHarness();
  ~DaemonHarness();

  // Starts ktesiod with `extra_args`; returns false (with the daemon's stderr kept) when it did
  // not answer within the deadline or exited.
  bool Start(const std::vector<std::string>& extra_args = {});
  // SIGTERM and wait (up to 10 s, then SIGKILL). Returns the exit code (-1 if signalled).
  int Stop();
  // SIGKILL, no cleanup: simulates a daemon crash.
  void Kill();
  // Waits for the daemon to exit on its own; its exit code, -2 when it is still running after
  // `timeout` (-1 when killed by a signal).
  int WaitForExit(std::chrono::milliseconds timeout);

  // Runs `binary` instead of the build's ktesiod from the next Start() (e.g. a copy without its
  // shim beside it), with `env` ("NAME=value", or "NAME" to unset) applied on top of ours.
  void set_binary(std::string binary) { binary_ = std::move(binary); }
  void set_env(std::vector<std::string> env) { env_ = std::move(env); }

  // Runs ktctl against this daemon's socket.
  RunResult Ctl(const std::vector<std::string>& args, const RunOptions& options = {}) const;

  const std::string& state_dir() const { return state_dir_; }
  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_.path(); }
  std::string DaemonLog() const;
  pid_t pid() const { return pid_; }

 private:
  TempDir dir_;
  std::string state_dir_;
  std::string socket_;
  std::string log_path_;
  pid_t pid_ = -1;
  std::string binary_;
  std::vector<std::string> env_;
};

// Writes `dir`/adapter.toml for the fixture agent ktesio-probe: kind `kind`, the
// whitespace-separated `args`, pause guaranteed, self-reported metering, then `extra_toml`
// appended as is. Creates `dir`; returns it.
std::string WriteProbeManifest(const std::string& dir, const std::string& kind,
                               const std::string& args, const std::string& extra_toml = "");

// True when something accepts connections on the Unix socket at `path`.
bool SocketAnswers(const std::string& path);

}  // namespace ktesio::testing
