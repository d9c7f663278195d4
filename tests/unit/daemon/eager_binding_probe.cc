// Linked with ktesiod/memory/eager_binding.cc, as ktesiod is: reports what the process saw by the
// time main() ran, one line per fact, for eager_binding_test.cc.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
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

int main() {
  const char* bind_now = getenv("LD_BIND_NOW");
  const char* marker = getenv("KTESIOD_EAGER_BINDING");
  std::printf("pid %d\n", static_cast<int>(getpid()));
  std::printf("reexecuted %s\n",
              ktesio::daemon::memory::ReexecutedForEagerBinding() ? "yes" : "no");
  std::printf("ld_bind_now %s\n", bind_now != nullptr ? bind_now : "(unset)");
  std::printf("marker %s\n", marker != nullptr ? marker : "(unset)");
  std::printf("executed_bound_now %s\n", InExecEnvironment("LD_BIND_NOW=1") ? "yes" : "no");
  return 0;
}
