#pragma once

#include "daemon/options.h"

namespace ktesio::daemon {

// Runs the daemon until SIGTERM/SIGINT: resolves paths, takes the state-dir lock, opens the
// store, binds the socket, serves the API, notifies the service manager. Returns the process
// exit code (0 clean shutdown, 1 start-up failure, 2 usage error).
int RunDaemon(const DaemonOptions& options);

}  // namespace ktesio::daemon
