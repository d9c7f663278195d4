#pragma once

// Eager symbol binding for the daemon process (docs/operations.md "Memory when idle").
//
// The shared libraries the daemon uses (gRPC, Protobuf, libstdc++, ...) are built for lazy
// binding: the first call of each imported function goes through the dynamic linker, which
// searches the symbol tables of every loaded library. After start-up's code is released
// (ReleaseCode), each such first call maps those tables back in: about 2.5 MiB of the daemon's
// PSS, measured with 100 agents. Binding every symbol once at start, before the release, leaves
// nothing for later calls to look up.
//
// glibc binds eagerly when LD_BIND_NOW is set at exec, so the daemon re-executes itself once
// with it (same pid, same arguments) and removes it again from the environment it then runs
// with: agents never inherit it. If the variable was already set by the caller, or the re-exec
// fails, the daemon simply runs on as it is.

namespace ktesio::daemon::memory {

// Call first thing in main(), before any thread or file descriptor exists. Returns only in the
// process that is to run on (after the re-exec, or when none is needed or possible).
void EnsureEagerBinding(char** argv);

}  // namespace ktesio::daemon::memory
