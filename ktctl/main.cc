// ktctl: the thin CLI over the ktesio.v1 API.

#include <csignal>
#include <string>
#include <vector>

#include "cli/app.h"
#include "grpc/support/log.h"

namespace {
// gRPC's own log lines are not for ktctl's users; errors reach them as messages instead.
void SilentLog(gpr_log_func_args*) {}
}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  gpr_set_log_function(SilentLog);
  std::vector<std::string> args(argv + 1, argv + argc);
  return ktesio::cli::RunCli(args);
}
