#include "memory/eager_binding.h"

#include <unistd.h>

#include <cstdlib>

namespace ktesio::daemon::memory {

namespace {
// Set beside LD_BIND_NOW for the re-executed process: "this process set LD_BIND_NOW itself".
constexpr const char* kMarker = "KTESIOD_EAGER_BINDING";
}  // namespace

void EnsureEagerBinding(char** argv) {
#if defined(__linux__) && defined(__GLIBC__)
  if (getenv(kMarker) != nullptr) {
    // The re-executed process: bound eagerly; the variables go, so children never see them.
    unsetenv(kMarker);
    unsetenv("LD_BIND_NOW");
    return;
  }
  const char* bind_now = getenv("LD_BIND_NOW");
  if (bind_now != nullptr && bind_now[0] != '\0') {
    return;  // the caller asked for eager binding already: nothing to do, nothing to undo
  }
  if (setenv("LD_BIND_NOW", "1", 1) != 0 || setenv(kMarker, "1", 1) != 0) {
    unsetenv(kMarker);
    unsetenv("LD_BIND_NOW");
    return;
  }
  execv("/proc/self/exe", argv);
  // No /proc, or no exec permission: run on with lazy binding, as before.
  unsetenv(kMarker);
  unsetenv("LD_BIND_NOW");
#else
  (void)argv;
#endif
}

}  // namespace ktesio::daemon::memory
