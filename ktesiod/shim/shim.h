#pragma once

// The shim's whole life: prepare the run directory, log and stdin, start the agent, report the
// handshake, capture until the agent exits, write the exit record.

#include "options.h"

namespace ktesio::daemon::shim {

inline constexpr int kExitSetupFailed = 1;

// Returns the shim's exit code: 0 once an exit record has been written (including
// exec-failed), kExitSetupFailed if the shim could not even get that far.
int RunShim(const Options& options);

}  // namespace ktesio::daemon::shim
