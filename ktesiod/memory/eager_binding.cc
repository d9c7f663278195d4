#include "memory/eager_binding.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace ktesio::daemon::memory {

namespace {

// Set beside LD_BIND_NOW for the re-executed image: "this process set LD_BIND_NOW itself".
constexpr char kMarker[] = "KTESIOD_EAGER_BINDING";
constexpr char kMarkerEntry[] = "KTESIOD_EAGER_BINDING=1";
constexpr char kBindNowEntry[] = "LD_BIND_NOW=1";

bool g_reexecuted = false;

// NAME=... in a NULL-terminated environment block; nullptr when absent.
const char* Find(char** envp, const char* name) {
  const size_t length = strlen(name);
  for (char** entry = envp; entry != nullptr && *entry != nullptr; ++entry) {
    if (strncmp(*entry, name, length) == 0 && (*entry)[length] == '=') {
      return *entry + length + 1;
    }
  }
  return nullptr;
}

// Runs from .preinit_array: libraries loaded and relocated, none initialised yet. Only libc
// calls that need no initialisation (no stdio, no locale, no allocation).
void BindEagerly(int /*argc*/, char** argv, char** envp) {
#if defined(__linux__) && defined(__GLIBC__)
  if (Find(envp, kMarker) != nullptr) {
    g_reexecuted = true;  // the variables are removed by the constructor below
    return;
  }
  const char* bind_now = Find(envp, "LD_BIND_NOW");
  if (bind_now != nullptr && bind_now[0] != '\0') {
    return;  // the caller asked for eager binding already: nothing to do, nothing to undo
  }
  // The environment as it is, plus the two entries; an environment too large to copy here is
  // simply run with as it is.
  static char* env[4096];
  size_t count = 0;
  for (char** entry = envp; entry != nullptr && *entry != nullptr; ++entry) {
    if (count + 3 >= sizeof env / sizeof env[0]) {
      return;
    }
    if (strncmp(*entry, "LD_BIND_NOW=", 12) != 0) {  // an empty one is replaced
      env[count++] = *entry;
    }
  }
  env[count++] = const_cast<char*>(kBindNowEntry);
  env[count++] = const_cast<char*>(kMarkerEntry);
  env[count] = nullptr;
  execve("/proc/self/exe", argv, env);
  // No /proc, or no exec permission: run on with lazy binding, as before.
#else
  (void)argv;
  (void)envp;
#endif
}

// Before main(), after the libraries' initialisers: the re-executed image forgets the two
// variables, so that nothing the daemon starts inherits them.
__attribute__((constructor)) void ForgetEagerBindingVariables() {
  if (g_reexecuted) {
    unsetenv(kMarker);
    unsetenv("LD_BIND_NOW");
  }
}

}  // namespace

bool ReexecutedForEagerBinding() { return g_reexecuted; }

// glibc calls .preinit_array entries of the executable with (argc, argv, envp) before any
// shared object's initialisers.
__attribute__((section(".preinit_array"),
               used)) void (*const kBindEagerlyAtPreinit)(int, char**, char**) = BindEagerly;

}  // namespace ktesio::daemon::memory
