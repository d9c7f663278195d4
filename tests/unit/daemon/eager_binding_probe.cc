// Runs memory::EnsureEagerBinding as ktesiod's main() does and reports what it saw, one line per
// fact, for eager_binding_test.cc. "start" is written (unbuffered) before the call, so a process
// that re-executes itself prints it twice, with the same pid.

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "memory/eager_binding.h"

namespace {

// Whether NAME=VALUE was in the environment this process image was executed with.
bool InExecEnvironment(const std::string& entry) {
  std::ifstream in("/proc/self/environ", std::ios::binary);
  for (std::string item; std::getline(in, item, '\0');) {
    if (item == entry) {
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int /*argc*/, char** argv) {
  const std::string start = "start " + std::to_string(getpid()) + "\n";
  (void)!write(STDOUT_FILENO, start.data(), start.size());
  ktesio::daemon::memory::EnsureEagerBinding(argv);
  const char* bind_now = getenv("LD_BIND_NOW");
  const char* marker = getenv("KTESIOD_EAGER_BINDING");
  std::printf("ld_bind_now %s\n", bind_now != nullptr ? bind_now : "(unset)");
  std::printf("marker %s\n", marker != nullptr ? marker : "(unset)");
  std::printf("executed_bound_now %s\n", InExecEnvironment("LD_BIND_NOW=1") ? "yes" : "no");
  return 0;
}
