#include "memory/eager_binding.h"

#include <unistd.h>
#if defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

#include <cstdlib>
#include <cstring>

namespace ktesio::daemon::memory {

namespace {

// Set beside LD_BIND_NOW for the re-executed image, as "PID:NAME": this process (PID) set
// LD_BIND_NOW itself, and NAME is its name before the exec (the kernel names a process after the
// file it executes, here "exe").
constexpr char kMarker[] = "KTESIOD_EAGER_BINDING";

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

// Writes the decimal digits of `value` at `out`; returns the position after them.
char* PutDecimal(char* out, long value) {
  char digits[24];
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && count < 24);
  while (count > 0) {
    *out++ = digits[--count];
  }
  return out;
}

#if defined(__linux__) && defined(__GLIBC__)
// If `marker` ("PID:NAME") was set by this very process before its re-exec (with LD_BIND_NOW=1
// beside it): restores the name and returns true. A marker of another pid, or without the
// binding it stands for, was inherited from elsewhere and is not ours.
bool OwnMarker(const char* marker, const char* bind_now) {
  if (bind_now == nullptr || strcmp(bind_now, "1") != 0) {
    return false;
  }
  char pid[24];
  char* end = PutDecimal(pid, static_cast<long>(getpid()));
  *end = '\0';
  const size_t length = strlen(pid);
  if (strncmp(marker, pid, length) != 0 || marker[length] != ':') {
    return false;
  }
  char name[16] = {};
  strncpy(name, marker + length + 1, sizeof name - 1);
  prctl(PR_SET_NAME, name, 0, 0, 0);
  return true;
}
#endif

// Runs from .preinit_array: libraries loaded and relocated, none initialised yet. Only libc
// calls that need no initialisation (no stdio, no locale, no allocation).
void BindEagerly(int /*argc*/, char** argv, char** envp) {
#if defined(__linux__) && defined(__GLIBC__)
  const char* bind_now = Find(envp, "LD_BIND_NOW");
  if (const char* marker = Find(envp, kMarker); marker != nullptr && OwnMarker(marker, bind_now)) {
    g_reexecuted = true;  // the variables are removed by the constructor below
    return;
  }
  if (bind_now != nullptr && bind_now[0] != '\0') {
    return;  // the caller asked for eager binding already: nothing to do, nothing to undo
  }
  // Started as an argument of the dynamic loader ("ld-linux-x86-64.so.2 ktesiod ..."): then
  // /proc/self/exe is the loader, and executing it with our arguments would not run us again.
  if (getauxval(AT_BASE) == 0) {
    return;
  }
  // "KTESIOD_EAGER_BINDING=PID:NAME"
  static char marker_entry[sizeof kMarker + 24 + 16 + 2];
  char* out = marker_entry;
  memcpy(out, kMarker, sizeof kMarker - 1);
  out += sizeof kMarker - 1;
  *out++ = '=';
  out = PutDecimal(out, static_cast<long>(getpid()));
  *out++ = ':';
  char name[16] = {};
  prctl(PR_GET_NAME, name, 0, 0, 0);
  const size_t name_length = strnlen(name, sizeof name - 1);
  memcpy(out, name, name_length);
  out[name_length] = '\0';
  // The environment as it is, plus the two entries (an empty LD_BIND_NOW and a stale marker are
  // replaced); an environment too large to copy here is simply run with as it is.
  static char bind_now_entry[] = "LD_BIND_NOW=1";
  static char* env[4096];
  size_t count = 0;
  for (char** entry = envp; entry != nullptr && *entry != nullptr; ++entry) {
    if (count + 3 >= sizeof env / sizeof env[0]) {
      return;
    }
    if (strncmp(*entry, "LD_BIND_NOW=", 12) != 0 &&
        (strncmp(*entry, kMarker, sizeof kMarker - 1) != 0 ||
         (*entry)[sizeof kMarker - 1] != '=')) {
      env[count++] = *entry;
    }
  }
  env[count++] = bind_now_entry;
  env[count++] = marker_entry;
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
