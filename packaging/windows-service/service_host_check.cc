// A stand-in daemon body for the Windows service host, so the host can be compiled, linked and
// (on Windows, by hand) exercised without the daemon libraries: it reports ready, logs every
// control, reloads on PARAMCHANGE and returns 0 on stop. Built by check.sh with mingw-w64.
//   service_host_check.exe --console      Ctrl-C stops it
//   sc.exe create ktesiod binPath= "C:\path\service_host_check.exe"; sc.exe start/stop ktesiod

#include <cstdio>
#include <string>

#include "service_host_win.h"

int main(int argc, char** argv) {
  const bool console = argc > 1 && std::string(argv[1]) == "--console";
  return ktesio::daemon::platform::RunServiceOrConsole(
      [](ktesio::daemon::platform::ServiceHost& host) {
        host.ReportReady();
        std::fprintf(stderr, "ready\n");
        while (host.WaitForControl() == ktesio::daemon::platform::Control::kReload) {
          std::fprintf(stderr, "reload (%.*s)\n", static_cast<int>(host.LastControlSource().size()),
                       host.LastControlSource().data());
        }
        host.ReportStopping();
        std::fprintf(stderr, "stopping (%.*s)\n", static_cast<int>(host.LastControlSource().size()),
                     host.LastControlSource().data());
        return 0;
      },
      console);
}
