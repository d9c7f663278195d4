#pragma once

// Helpers for tests that launch real shims through the daemon's ShimBackend.

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "boost/asio/io_context.hpp"
#include "process/shim_backend.h"
#include "shim_test_util.h"

namespace ktesio::daemon::shim::testing {

// A backend that finds the shim built with the tests.
process::ShimSearch BuiltShim();

// A launch of ktesio-probe with `args` (and `env`) through `backend`, run to its handshake.
absl::StatusOr<process::Launched> LaunchProbe(
    boost::asio::io_context& io, process::ShimBackend& backend, const TempDir& dir,
    std::vector<std::string> args = {"--heartbeat-ms", "1000"}, std::vector<std::string> env = {});

// Whether `pid` is gone: reaped here when it is this process's child (an exec'd shim), else no
// longer in /proc (a shim the launcher forked is reaped by the kernel).
bool Gone(pid_t pid);

// The parent of `pid` from /proc/PID/stat, or 0.
pid_t ParentOf(pid_t pid);

// Kills a launched agent's process group when the test ends, whichever way it ends.
struct KillGroupOnExit {
  pid_t group = 0;
  ~KillGroupOnExit() {
    if (group > 1) {
      kill(-group, SIGKILL);
    }
  }
};

}  // namespace ktesio::daemon::shim::testing
