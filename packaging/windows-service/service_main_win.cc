// The Windows ktesiod entry point: the daemon run by the Service Control Manager (install with
// install-service.ps1) or, started from a shell, in the console (`ktesiod --console` forces it).
// It reuses the daemon's flag parsing and RunDaemon unchanged; only the host differs from the
// POSIX main (ktesiod/main.cc). Not compiled in CI: it needs the daemon libraries, which need
// gRPC and a Windows process backend (see README.md).

#include <cstdio>
#include <string>
#include <vector>

#include "daemon/daemon.h"
#include "daemon/options.h"
#include "service_host_win.h"

int main(int argc, char** argv) {
  std::vector<std::string> args;
  bool console = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--console") {
      console = true;
    } else {
      args.emplace_back(argv[i]);
    }
  }
  absl::StatusOr<ktesio::daemon::DaemonOptions> options = ktesio::daemon::ParseDaemonFlags(args);
  if (!options.ok()) {
    std::fprintf(stderr, "ktesiod: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  return ktesio::daemon::platform::RunServiceOrConsole(
      [&](ktesio::daemon::platform::ServiceHost& host) {
        return ktesio::daemon::RunDaemon(*options, host);
      },
      console);
}
