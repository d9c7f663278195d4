#pragma once

// Respawn in place (docs/shim.md): while its run is `running`, the daemon leaves a grant in the
// run dir saying which exits it would answer with an immediate restart. The shim takes the grant
// for such an exit and relaunches the agent itself — one fork and exec instead of a new shim
// through the daemon — then records what happened for the daemon to commit behind it. A grant
// is good for one relaunch: the daemon writes the next one after it has recorded the last.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "respawn_format.h"

namespace ktesio::daemon::shim {

// Parses a grant ("crash_after_ms N\nclean_after_ms N\nusage_file PATH\n"); nullopt when any
// line is missing or malformed (the shim then leaves the restart to the daemon).
std::optional<RespawnGrant> ParseRespawnGrant(std::string_view text);

// Whether `grant` covers an exit with `wait_status` after a run of `run_ms`.
bool GrantCovers(const RespawnGrant& grant, int wait_status, int64_t run_ms);

// The grant in `run_dir` when it covers this exit. Reading it does not consume it: the shim
// relaunches first and consumes the grant right after (ConsumeRespawnGrant), so no filesystem
// write sits between the agent's exit and its replacement's exec. A stop the daemon begins in
// between finds the grant still there, withdraws it, and kills the relaunched agent when the
// record of the relaunch reaches it.
std::optional<RespawnGrant> ReadRespawnGrant(const std::string& run_dir, int wait_status,
                                             int64_t run_ms);

// Removes the grant after a relaunch, so that it serves one relaunch only.
void ConsumeRespawnGrant(const std::string& run_dir);

// The kernel's start time of `pid` (/proc/<pid>/stat field 22, clock ticks since boot); 0 when
// unreadable. Read while the agent is the shim's unreaped child, so the pid is still its own.
int64_t ProcStartTime(pid_t pid);

// The record of a relaunch: the previous run's exit record, then "run_ms N", "pid N",
// "start_time N" (ProcStartTime) and "started_at_ms N" (the relaunch, Unix ms) lines.
std::string FormatRespawned(int wait_status, int64_t run_ms, pid_t agent, int64_t start_time,
                            int64_t started_at_ms);

}  // namespace ktesio::daemon::shim
