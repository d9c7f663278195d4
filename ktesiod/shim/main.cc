// ktesio-shim: the per-agent supervisor stub. See docs/shim.md.

#include <fcntl.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <string_view>
#include <vector>

#include "io.h"
#include "launcher.h"
#include "launcher_protocol.h"
#include "options.h"
#include "shim.h"

namespace {

#if defined(__GLIBC__)
// One shim runs per agent, so idle memory matters. A fixed mmap threshold makes every block of
// 64 KiB and more its own mapping, unmapped when freed, rather than heap memory that stays
// resident after a burst (glibc otherwise raises the threshold on free): the capture buffers, and
// the 73 KiB emergency exception pool libstdc++'s static constructor allocates. That pool must
// not be carved from the 128 KiB of padding glibc's own start-up grew the heap by (the static
// start-up mallocs before any constructor), so the padding goes (no top padding, and the heap
// trimmed to what it holds) before any other constructor runs. The heap then holds only small
// blocks, packed, and a shim forked by the launcher writes one or two pages of it, not pages far
// up.
__attribute__((constructor(101))) void SetUpMalloc() {
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  mallopt(M_TOP_PAD, 0);
  malloc_trim(0);
}
#endif

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

// The shim proper, exec'd (main) or forked by the launcher: `args` are those after argv[0].
int ShimMain(const std::vector<std::string_view>& args) {
  namespace shim = ktesio::daemon::shim;
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

}  // namespace

int main(int argc, char** argv) {
  namespace shim = ktesio::daemon::shim;
  EnsureStandardFds();
  if (argc > 1 && argv[1] == shim::kLauncherFlag) {
    // Started by ktesiod with its socket on fd 3 (and a filler argument after the flag, for the
    // title area: launcher_protocol.h); nothing else starts it.
    constexpr int kControlFd = 3;
    if (fcntl(kControlFd, F_GETFD) < 0) {
      shim::Report("--launcher needs the daemon's socket on fd 3");
      return shim::kExitUsage;
    }
    return shim::RunLauncher(kControlFd, argc, argv, &ShimMain);
  }
  return ShimMain(std::vector<std::string_view>(argv + 1, argv + argc));
}
