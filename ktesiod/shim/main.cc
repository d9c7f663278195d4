// ktesio-shim: the per-agent supervisor stub. See docs/shim.md.

#include <fcntl.h>
#include <unistd.h>

#include <string_view>
#include <vector>

#include "io.h"
#include "options.h"
#include "shim.h"

namespace {

// The daemon may start the shim with fds 0-2 closed; without this, the agent's pipes could land
// on them and the shim's own error messages would go into the agent's stdin or log.
void EnsureStandardFds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) {
      int null_fd = open("/dev/null", O_RDWR);
      if (null_fd >= 0 && null_fd != fd) {
        dup2(null_fd, fd);
        close(null_fd);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace shim = ktesio::daemon::shim;
  EnsureStandardFds();
  std::vector<std::string_view> args(argv + 1, argv + argc);
  shim::ParseResult parsed = shim::ParseOptions(args);
  if (parsed.help) {
    shim::WriteOnce(STDOUT_FILENO, shim::UsageText());
    return 0;
  }
  if (!parsed.options) {
    shim::Report(parsed.error);
    shim::WriteOnce(STDERR_FILENO, shim::UsageText());
    return shim::kExitUsage;
  }
  if (parsed.options->ready_fd >= 0 && fcntl(parsed.options->ready_fd, F_GETFD) < 0) {
    shim::Report("--ready-fd " + std::to_string(parsed.options->ready_fd) +
                 " is not an open descriptor");
    return shim::kExitUsage;
  }
  return shim::RunShim(*parsed.options);
}
