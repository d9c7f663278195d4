#pragma once

// ktesiod's offline maintenance modes, run instead of the daemon:
//   ktesiod --check            read-only: the store's integrity and schema, and the state dir
//                              (orphaned agent homes, homes that are gone, stale run dirs)
//   ktesiod --restore BACKUP   puts a backup (ktctl daemon backup) in place of state.db while
//                              no daemon owns the state dir; the store it replaces is kept
// Both print a report on stdout and return the process exit code: 0 fine, 1 problems found or
// refused, 2 usage.

#include <string>

#include "daemon/options.h"

namespace ktesio::daemon {

int RunCheck(const DaemonOptions& options);
int RunRestore(const DaemonOptions& options, const std::string& backup);

}  // namespace ktesio::daemon
