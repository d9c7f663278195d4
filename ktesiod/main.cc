// ktesiod: the Ktesio daemon. A library plus this main().

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/daemon.h"
#include "daemon/maintenance.h"
#include "daemon/options.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/v1/version.h"
#include "platform/service_host_posix.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<ktesio::daemon::DaemonOptions> options = ktesio::daemon::ParseDaemonFlags(args);
  if (!options.ok()) {
    std::fprintf(stderr, "ktesiod: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  if (options->show_help) {
    std::fputs(ktesio::daemon::kDaemonUsage, stdout);
    return 0;
  }
  if (options->show_version) {
    std::printf("ktesiod %s (api %s, contract %s)\n",
                std::string(ktesio::v1::kKtesioVersion).c_str(),
                std::string(ktesio::v1::kApiVersion).c_str(),
                std::string(ktesio::contract::kContractVersion).c_str());
    return 0;
  }
  if (options->check) {
    return ktesio::daemon::RunCheck(*options);
  }
  if (!options->restore_from.empty()) {
    return ktesio::daemon::RunRestore(*options, options->restore_from);
  }
#ifdef NDEBUG
  // Debian builds Abseil without NDEBUG, so every absl::Mutex acquisition — the daemon's and
  // gRPC's own (grpc_core::Mutex wraps absl::Mutex) — maintained a process-wide lock-order graph
  // under a global lock: GraphCycles showed in profiles of the metering proxy and the API. Release
  // builds switch that debug check off before any thread exists; dev and sanitizer builds keep
  // it, so the tests still catch a lock-order inversion.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  // Before any thread exists: the host blocks the control signals every thread inherits.
  std::unique_ptr<ktesio::daemon::platform::ServiceHost> host =
      ktesio::daemon::platform::MakePosixServiceHost();
  return ktesio::daemon::RunDaemon(*options, *host);
}
