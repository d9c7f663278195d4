// ktesiod: the Ktesio daemon. A library plus this main().

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

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
  // Before any thread exists: the host blocks the control signals every thread inherits.
  std::unique_ptr<ktesio::daemon::platform::ServiceHost> host =
      ktesio::daemon::platform::MakePosixServiceHost();
  return ktesio::daemon::RunDaemon(*options, *host);
}
