// Linked with ktesiod/memory/eager_binding.cc, as ktesiod is: reports what the process saw by the
// time main() ran, one "KEY VALUE" line per fact, for eager_binding_test.cc.

#include <fcntl.h>
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

const char* Env(const char* name) {
  const char* value = getenv(name);
  return value != nullptr ? value : "(unset)";
}

}  // namespace

int main(int argc, char** argv) {
  std::string args;
  for (int i = 1; i < argc; ++i) {
    args += (i > 1 ? "," : "") + std::string(argv[i]);
  }
  std::string comm;
  std::getline(std::ifstream("/proc/self/comm"), comm);
  // A descriptor the caller left open (as systemd's socket activation does) must survive.
  const int fd = atoi(Env("PROBE_FD"));
  std::printf("pid %d\n", static_cast<int>(getpid()));
  std::printf("reexecuted %s\n",
              ktesio::daemon::memory::ReexecutedForEagerBinding() ? "yes" : "no");
  std::printf("ld_bind_now %s\n", Env("LD_BIND_NOW"));
  std::printf("marker %s\n", Env("KTESIOD_EAGER_BINDING"));
  std::printf("executed_bound_now %s\n", InExecEnvironment("LD_BIND_NOW=1") ? "yes" : "no");
  std::printf("args %s\n", args.c_str());
  std::printf("comm %s\n", comm.c_str());
  std::printf("fd %s\n", fd > 2 && fcntl(fd, F_GETFD) >= 0 ? "open" : "closed");
  std::printf("keep %s\n", Env("PROBE_KEEP"));
  return 0;
}
