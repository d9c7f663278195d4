#pragma once

// The platform seam between the daemon's main loop and the OS's service manager. The daemon
// asks its host for the next control (stop or reload) and reports readiness and stopping; the
// host maps those to the OS mechanism:
//   - POSIX (service_host_posix.cc): SIGTERM/SIGINT -> stop, SIGHUP -> reload, taken with
//     sigwait; readiness and stopping go to systemd's $NOTIFY_SOCKET (READY=1 / STOPPING=1).
//   - Windows (packaging/windows-service/service_host_win.cc): the Service Control Manager's
//     STOP/SHUTDOWN -> stop and PARAMCHANGE -> reload, reported as SERVICE_RUNNING /
//     SERVICE_STOP_PENDING; outside the SCM, a console host maps Ctrl-C/Ctrl-Break/close to stop.
// This header is portable C++ on purpose: the Windows sources include it unchanged.

#include <string_view>

namespace ktesio::daemon::platform {

enum class Control { kStop, kReload };

class ServiceHost {
 public:
  virtual ~ServiceHost() = default;
  // Blocks until the service manager, a signal or the console asks for something.
  virtual Control WaitForControl() = 0;
  // The daemon serves: systemd READY=1, SCM SERVICE_RUNNING.
  virtual void ReportReady() = 0;
  // The daemon is shutting down: systemd STOPPING=1, SCM SERVICE_STOP_PENDING.
  virtual void ReportStopping() = 0;
  // What asked for the last control, for the log ("SIGTERM", "service stop", "console Ctrl-C").
  virtual std::string_view LastControlSource() const = 0;
};

}  // namespace ktesio::daemon::platform
