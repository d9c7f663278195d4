#pragma once

// Starts the agent as the shim's child, in its own session, with a clean execution context.

#include <sys/types.h>

#include <string>
#include <vector>

namespace ktesio::daemon::shim {

struct AgentStdio {
  int in = -1;
  int out = -1;
  int err = -1;
};

struct SpawnResult {
  pid_t pid = -1;  // The running agent, when error == 0.
  int error = 0;   // errno of the failed fork, chdir or exec; the failed child is already reaped.
};

// Closes every fd >= 3 except `keep` (close_range, else a walk of /proc/self/fd). For a child
// after fork: the process must be single-threaded.
void CloseOtherFds(int keep);

// Default disposition for every signal and an empty signal mask.
void ResetSignals();

// Forks and execs `command` (PATH search on command[0] unless it contains '/', using the PATH of
// the shim's environment, which is the agent's). The child becomes a session and process group
// leader, gets `stdio` as fds 0-2 and nothing else, default signal handling, an empty signal
// mask, umask 022 and working directory `cwd`. Returns only after the exec succeeded or failed,
// learned through a close-on-exec pipe.
SpawnResult SpawnAgent(const std::vector<std::string>& command, const std::string& cwd,
                       const AgentStdio& stdio);

}  // namespace ktesio::daemon::shim
