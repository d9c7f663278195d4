#pragma once

// The kit's view of an agent's real processes, from /proc (Linux). Used by subject mode
// (Options::subject_program) to observe what the subject's own program really does: which
// processes it runs, whether they are frozen, what each received.

#include <string>
#include <vector>

namespace ktesio::tck::internal {

struct ProcInfo {
  long long pid = 0;
  long long ppid = 0;
  long long pgrp = 0;
  long long session = 0;
  char state = 0;  // the /proc/<pid>/stat state letter
  std::string comm;
};

// Every live process readable in /proc (zombies included, state 'Z').
std::vector<ProcInfo> ListProcesses();

// The agent's processes, the agent itself first: `agent_pid`, its descendants (ppid walk),
// every member of its session when it leads one (the engine launches it so), and — when its parent
// is the engine's shim (comm "ktesio-shim", a child subreaper) — the shim's other descendants, i.e.
// orphans of the agent the shim adopted. Zombies are left out (they are dead). Empty when
// `agent_pid` is gone. Cannot see: a process that left the agent's session AND was re-parented
// outside the shim.
std::vector<ProcInfo> AgentProcesses(long long agent_pid);

// "pid 123 (sh)".
std::string Name(const ProcInfo& p);

// /proc/<pid>/environ split at NULs ("NAME=value" entries); empty when unreadable.
std::vector<std::string> ProcEnviron(long long pid);

// /proc/<pid>/cmdline split at NULs; empty when unreadable.
std::vector<std::string> ProcArgv(long long pid);

}  // namespace ktesio::tck::internal
