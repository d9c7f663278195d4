#pragma once

// Resource figures of processes read from /proc (Linux): an agent's whole process tree, and the
// daemon itself. Read-only, no state: callable from any thread.

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace ktesio::daemon::telemetry {

struct TreeStats {
  double cpu_seconds = 0;       // user + system of the tree, including reaped children
  uint64_t resident_bytes = 0;  // sum of RSS over the tree's live processes
  uint32_t processes = 0;       // live processes counted
};

// The tree under `root` (its descendants, found through /proc/PID/task/TID/children), plus
// `root` itself when `include_root`. `root_start_time` (clock ticks since boot, as stored in the
// spawn record) guards against a reused pid; 0 skips the check. nullopt when `root` is gone.
std::optional<TreeStats> SampleTree(pid_t root, uint64_t root_start_time, bool include_root);

struct SelfStats {
  double cpu_seconds = 0;
  uint64_t resident_bytes = 0;
  uint64_t virtual_bytes = 0;
  uint64_t open_fds = 0;
  uint64_t max_fds = 0;
  double start_time_seconds = 0;  // Unix time
};

// The calling process (for the standard process_* metrics).
SelfStats SampleSelf();

}  // namespace ktesio::daemon::telemetry
