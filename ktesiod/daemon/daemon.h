#pragma once

#include "daemon/options.h"
#include "platform/service_host.h"

namespace ktesio::daemon {

// Runs the daemon until SIGTERM/SIGINT: resolves paths, takes the state-dir lock, opens the
// store, binds the socket, serves the API, notifies the service manager. Returns the process
// exit code (0 clean shutdown, 1 start-up failure, 2 usage error).
// `host` delivers stop/reload controls and takes the readiness reports (platform seam); on
// POSIX it must have been created before this is called (it blocks the control signals).
int RunDaemon(const DaemonOptions& options, platform::ServiceHost& host);

}  // namespace ktesio::daemon
