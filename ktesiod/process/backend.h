#pragma once

// The process backend: how the engine launches an agent (through its ktesio-shim), signals its
// process group, and learns that it exited. An interface so the supervisor's unit tests can use
// a fake; the POSIX implementation (shim_backend) is used everywhere else. A Windows backend
// (Job Objects) would implement the same interface.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shim/respawn_format.h"

namespace ktesio::daemon::process {

struct LaunchSpec {
  std::string exec;
  std::vector<std::string> args;
  std::vector<std::string> env;  // NAME=VALUE, the agent's complete environment
  std::string cwd;               // the Agent Home
  bool stdin_pipe = false;       // stdin from a FIFO the engine can write (else /dev/null)
  std::string run_dir;           // where the shim keeps its pid files, stdin FIFO, exit record
  std::string log_dir;
  uint64_t log_max_bytes = 10 * 1024 * 1024;
  uint32_t log_keep = 3;
  std::string usage_file;  // "" = none
};

// Identity of a process that survives pid reuse: pid plus the kernel's start time.
struct ProcessIdentity {
  pid_t pid = 0;
  int64_t start_time = 0;  // clock ticks since boot (/proc/<pid>/stat field 22)
};

struct Launched {
  ProcessIdentity agent;
  ProcessIdentity shim;
  // When the shim was started, Unix ms; 0 when unknown. Set for an unconfirmed launch (the daemon
  // that made it died before recording the time).
  int64_t started_at_ms = 0;
};

struct ExitRecord {
  enum class Kind { kExited, kSignaled, kExecFailed };
  Kind kind = Kind::kExited;
  int value = 0;  // exit code, signal number, or errno
  // When the shim wrote it (Unix ms; 0 unknown): for an exit found by a later daemon, the run's
  // real end rather than the time it was found.
  int64_t at_ms = 0;
};

// Respawn in place (docs/shim.md): the grant and its files are the shim's format.
using shim::kRespawnedFile;
using shim::kRespawnGrantFile;
using shim::RespawnGrant;

// What the shim recorded after relaunching the agent under a grant.
struct Respawned {
  ExitRecord exit;            // how the previous run ended
  int64_t run_ms = 0;         // how long it ran, by the shim's clock
  ProcessIdentity agent;      // the relaunched agent (start time 0: unknown)
  int64_t started_at_ms = 0;  // when the shim relaunched it, Unix ms (0: unknown)
};

class ProcessBackend {
 public:
  virtual ~ProcessBackend() = default;

  // "" when agents can be launched, else why not (the daemon reports it as degraded).
  virtual std::string Problem() const { return ""; }

  // Launches the shim, which launches the agent. Calls `done` on the engine thread with the
  // identities once the shim confirms the exec, or with an error: NOT_FOUND/LAUNCH_FAILED when
  // the executable cannot be executed (errno named), INTERNAL/LAUNCH_FAILED otherwise.
  virtual void Launch(const LaunchSpec& spec,
                      std::function<void(absl::StatusOr<Launched>)> done) = 0;

  // Calls `on_exit` once on the engine thread when the shim `shim` has exited (immediately if
  // it is already gone). Returns false when the process is not `shim` any more.
  virtual bool WatchExit(const ProcessIdentity& shim, std::function<void()> on_exit) = 0;

  // Calls `on_respawn` on the engine thread whenever the shim `shim` (watched by WatchExit) may
  // have recorded a relaunch in `run_dir`; TakeRespawned tells. Stops with the exit watch. False
  // when the run dir cannot be watched: no grant may be given then.
  virtual bool WatchRespawn(const ProcessIdentity& shim, const std::string& run_dir,
                            std::function<void()> on_respawn) {
    (void)shim;
    (void)run_dir;
    (void)on_respawn;
    return false;
  }

  // Leaves `grant` in `run_dir` for the shim running there (replacing any earlier one).
  virtual absl::Status GrantRespawn(const std::string& run_dir, const RespawnGrant& grant) {
    (void)run_dir;
    (void)grant;
    return absl::OkStatus();
  }

  // Takes back the grant in `run_dir`. False when there was none left to take back: never given,
  // or already taken by the shim for a relaunch.
  virtual bool WithdrawRespawn(const std::string& run_dir) {
    (void)run_dir;
    return false;
  }

  // The relaunch the shim recorded in `run_dir`, consumed (read once); nullopt when there is
  // none. The agent's start time is 0 when it is gone already (its exit then follows). Errors:
  // DATA_LOSS when a record was there but could not be read or parsed (it is removed all the
  // same).
  virtual absl::StatusOr<std::optional<Respawned>> TakeRespawned(const std::string& run_dir) {
    (void)run_dir;
    return std::nullopt;
  }

  // Reads the exit record the shim left in `run_dir`, if any.
  virtual std::optional<ExitRecord> ReadExit(const std::string& run_dir) = 0;

  // The launch a daemon left unconfirmed in `run_dir`: it died after its shim had started the
  // agent but before it committed the spawn record. The live shim named by the run dir's pid
  // file (verified to be running that very run dir) and its agent (verified to be the shim's
  // child); nullopt when there is none. The agent's identity is empty when the shim has not
  // named one yet.
  virtual std::optional<Launched> UnconfirmedLaunch(const std::string& run_dir) {
    (void)run_dir;
    return std::nullopt;
  }

  // Sends `signal` to the process group led by `leader`. Errors: NOT_FOUND when the group is
  // gone, INTERNAL otherwise.
  virtual absl::Status SignalGroup(pid_t leader, int signal) = 0;

  // True while any process of the group led by `leader` exists.
  virtual bool GroupAlive(pid_t leader) = 0;

  // True when `identity` names a live process (same pid AND same start time).
  virtual bool IsAlive(const ProcessIdentity& identity) = 0;

  // Runs a helper command (a stop/pause/resume template) detached, in its own session, in `cwd`
  // with `env`; it is reaped when it exits, and killed with its process group (SIGKILL) when it is
  // still running after `limit`. Errors: LAUNCH_FAILED.
  virtual absl::Status RunDetached(const std::string& exec, const std::vector<std::string>& args,
                                   const std::vector<std::string>& env, const std::string& cwd,
                                   std::chrono::milliseconds limit) = 0;
};

// Reads the start time of `pid` from /proc. Errors: NOT_FOUND when there is no such process.
absl::StatusOr<int64_t> ProcessStartTime(pid_t pid);

// Parses a shim exit record ("exited 3", "signaled 9", "exec-failed 2").
std::optional<ExitRecord> ParseExitRecord(const std::string& text);

// Describes an exit for causes and messages: "exit code 3", "signal 9 (SIGKILL)", ...
std::string DescribeExit(const ExitRecord& record);

}  // namespace ktesio::daemon::process
