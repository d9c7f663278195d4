#pragma once

// Eager symbol binding for the daemon process (docs/operations.md "Memory when idle").
//
// The shared libraries the daemon uses (gRPC, Protobuf, libstdc++, ...) are built for lazy
// binding: the first call of each imported function goes through the dynamic linker, which
// searches the symbol tables of every loaded library. After start-up's code is released
// (ReleaseCode), each such first call maps those tables back in: about 2.3 MiB of the daemon's
// PSS, measured with 100 agents. Binding every symbol once at start, before the release, leaves
// nothing for later calls to look up.
//
// glibc binds eagerly when LD_BIND_NOW is set at exec, so the daemon re-executes itself once
// with it: same pid, same arguments. eager_binding.cc is linked into the ktesiod executable
// itself (not a library), where it registers a .preinit_array function: it runs after the
// dynamic linker has loaded the libraries and before any of them has run its initialisers, so
// the first image costs little more than the exec. The re-executed image takes back the process
// name the first one had (the kernel would name it "exe") and removes the variables from its
// environment again before main(): nothing it starts inherits them. If LD_BIND_NOW was already
// set by the caller, the daemon was started through the dynamic loader ("ld-linux... ktesiod"),
// or the re-exec fails, the daemon simply runs on as it is.

namespace ktesio::daemon::memory {

// Whether this process image was re-executed for eager binding (for the log and the tests).
bool ReexecutedForEagerBinding();

}  // namespace ktesio::daemon::memory
