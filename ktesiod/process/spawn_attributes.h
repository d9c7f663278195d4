#pragma once

// posix_spawn attributes for everything the daemon spawns detached (shims, the shim launcher,
// template commands): a new session, an empty signal mask and default dispositions (the daemon
// blocks and ignores signals of its own). Pair with posix_spawnattr_destroy.

#include <signal.h>
#include <spawn.h>

namespace ktesio::daemon::process {

inline void InitDetachedSpawnAttributes(posix_spawnattr_t* attr) {
  posix_spawnattr_init(attr);
  sigset_t empty;
  sigemptyset(&empty);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigmask(attr, &empty);
  posix_spawnattr_setsigdefault(attr, &all);
  posix_spawnattr_setflags(attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
}

}  // namespace ktesio::daemon::process
