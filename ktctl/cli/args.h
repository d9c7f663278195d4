#pragma once

// Command-line parsing for ktctl: global flags accepted anywhere on the line, and a small
// per-command parser for local flags and positionals.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ktesio::cli {

struct GlobalOptions {
  std::string socket;  // "" = KTESIO_SOCKET or the default
  bool json = false;
  std::optional<double> timeout_seconds;  // RPC deadline
  bool help = false;
  bool version = false;
};

struct Invocation {
  GlobalOptions global;
  std::vector<std::string> words;  // the command words and their own arguments
};

// Extracts global flags (--socket, --json, --timeout, --help/-h, --version) from anywhere on the
// line. Exception: after `agent stop|restart`, `--timeout` is the command's own stop window.
// Errors: INVALID_ARGUMENT (reason USAGE) for a global flag missing its value or a bad number.
absl::StatusOr<Invocation> ParseInvocation(const std::vector<std::string>& args);

// A command's own arguments: declared value flags and boolean flags, positionals in order.
struct LocalArgs {
  std::map<std::string, std::string> values;
  std::set<std::string> switches;
  std::vector<std::string> positionals;

  bool Has(const std::string& flag) const { return switches.count(flag) != 0; }
  std::optional<std::string> Value(const std::string& flag) const;
};

// Parses `args` against the declared flags. `--` ends flag parsing. Errors: INVALID_ARGUMENT
// (reason USAGE) for unknown flags, missing values, or a positional count outside
// [min_positionals, max_positionals].
absl::StatusOr<LocalArgs> ParseLocal(const std::vector<std::string>& args,
                                     const std::set<std::string>& value_flags,
                                     const std::set<std::string>& switch_flags,
                                     size_t min_positionals, size_t max_positionals);

// The socket ktctl uses when --socket is not given: KTESIO_SOCKET, else the daemon's user-mode
// default ($XDG_RUNTIME_DIR/ktesio/ktesiod.sock, else <state dir>/ktesiod.sock).
std::string DefaultSocketPath();

}  // namespace ktesio::cli
