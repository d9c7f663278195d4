#pragma once

#include <memory>

#include "platform/service_host.h"

namespace ktesio::daemon::platform {

// The POSIX host. Blocks SIGTERM, SIGINT and SIGHUP in the calling thread, so it must be
// created before the daemon starts any thread (threads inherit the mask, which keeps delivery
// to WaitForControl's sigwait deterministic); ignores SIGPIPE.
std::unique_ptr<ServiceHost> MakePosixServiceHost();

}  // namespace ktesio::daemon::platform
