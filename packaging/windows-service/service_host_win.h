#pragma once

// The Windows side of the daemon's platform seam (ktesiod/platform/service_host.h): run the
// daemon body as a Windows service under the Service Control Manager, or in a console when no
// SCM started the process.

#include <functional>

#include "platform/service_host.h"

namespace ktesio::daemon::platform {

// The daemon's body: serves until host.WaitForControl() returns kStop, then returns its exit
// code (0 clean, non-zero failure).
using ServiceBody = std::function<int(ServiceHost& host)>;

// The service's registered name (sc.exe create NAME ...), as install-service.ps1 uses it.
inline constexpr wchar_t kServiceName[] = L"ktesiod";

// Connects to the SCM with StartServiceCtrlDispatcherW and runs `body` as the service:
// SERVICE_START_PENDING until the body reports ready, SERVICE_RUNNING, SERVICE_STOP_PENDING
// on a stop/shutdown control, SERVICE_STOPPED with the body's exit code (a non-zero code is
// reported as ERROR_SERVICE_SPECIFIC_ERROR, which triggers the recovery actions the install
// script configures). When the process was not started by the SCM
// (ERROR_FAILED_SERVICE_CONTROLLER_CONNECT) it falls back to the console: Ctrl-C, Ctrl-Break
// and closing the window ask for a graceful stop. `force_console` skips the dispatcher.
int RunServiceOrConsole(const ServiceBody& body, bool force_console);

}  // namespace ktesio::daemon::platform
