#pragma once

// `ktesio-shim --launcher`: the one long-lived shim the daemon forks every new shim from, so that
// starting an agent costs a fork of this small, already-initialised process instead of an exec
// of the shim binary (docs/shim.md "The launcher"; the wire format is launcher_protocol.h).

#include <string_view>
#include <vector>

namespace ktesio::daemon::shim {

// What a forked shim runs: the arguments after argv[0], as the exec'd shim's main gets them.
using ShimEntry = int (*)(const std::vector<std::string_view>& args);

// Serves requests on `control_fd` until the daemon closes its end, then returns 0 (1 when the
// socket fails). `argv`/`argc` are the launcher's own main() arguments: their storage is the
// title area each forked shim rewrites. Forked shims never return from here: they run `entry`
// and exit with its code.
int RunLauncher(int control_fd, int argc, char** argv, ShimEntry entry);

}  // namespace ktesio::daemon::shim
