#pragma once

// Where the daemon keeps its state, socket and config (product.md §2), and the validation of
// names that become paths.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ktesio::daemon {

// Maximum length of a Unix socket path (sun_path minus the terminating NUL) on Linux.
inline constexpr size_t kMaxSocketPathLength = 107;

struct DaemonPaths {
  std::string state_dir;    // absolute
  std::string socket_path;  // absolute
  std::string config_path;  // absolute; the file may not exist
  bool system_mode = false;
};

// Explicit choices from flags; empty strings mean "not given".
struct PathOverrides {
  std::string state_dir;
  std::string socket_path;
  std::string config_path;
  bool system_mode = false;
};

// A read-only view of the environment, injectable for tests.
class Environment {
 public:
  virtual ~Environment() = default;
  // Returns "" when unset.
  virtual std::string Get(std::string_view name) const = 0;
};

// The real process environment.
const Environment& ProcessEnvironment();

// Resolves the daemon's paths: flags win over KTESIO_STATE_DIR / KTESIO_SOCKET, which win over
// the mode's defaults. Errors: INVALID_ARGUMENT when a state dir override is relative, when no
// home directory can be found in user mode, or when the socket path exceeds the OS limit.
absl::StatusOr<DaemonPaths> ResolveDaemonPaths(const PathOverrides& overrides,
                                               const Environment& env);

// Checks a socket path against the OS limit. Errors: INVALID_ARGUMENT naming the length.
absl::Status ValidateSocketPath(std::string_view path);

// Instance names: ^[a-z0-9][a-z0-9_-]*$, at most 128 characters.
// Errors: INVALID_ARGUMENT with reason INVALID_NAME and a message stating the rule.
absl::Status ValidateInstanceName(std::string_view name);

}  // namespace ktesio::daemon
