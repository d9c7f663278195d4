#pragma once

// Command-line parsing for ktctl: global flags accepted anywhere on the line, and each command's
// own flags and operands parsed against the command's declaration.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
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

// One argument a command accepts: an operand (a positional: "NAME", or "NAME..." for one or more)
// or a flag ("--timeout"). Each command declares its arguments once, in the command table
// (cli/app.h); parsing, the usage line, `--help`, the shell completions and the man page all read
// that declaration.
struct Arg {
  enum Need : uint8_t { kOptional, kRequired };
  std::string_view name;        // "NAME", "NAME...", "--timeout", "-f"
  std::string_view value = {};  // a value flag's placeholder ("SECS"); empty: a switch or operand
  std::string_view help = {};   // one line, for --help and the man page
  Need need = kOptional;
  // > 0: the arguments sharing the number are alternatives, shown "(A | B)" when required (one
  // must be given) and "[A | B]" otherwise; two given together are refused unless both are
  // `combinable` (names and --selector select together; --all stands alone).
  int group = 0;
  bool combinable = false;
  std::string_view alias = {};  // a second spelling of a flag ("-l" for "--selector")
  bool repeatable = false;      // a value flag given several times keeps every value
  // Not empty: a value flag given several times means all of them, its values joined with this
  // ("-l a=1 -l b=2" selects as "a=1,b=2"); otherwise the last value counts.
  std::string_view join = {};

  bool IsFlag() const { return name.size() > 1 && name[0] == '-'; }
  bool IsList() const { return name.ends_with("..."); }  // an operand taking the rest
};

// A command's own arguments, parsed against its declaration. Flags are keyed by their declared
// name (an alias is stored under the name).
struct LocalArgs {
  std::map<std::string, std::string> values;              // the last value of each value flag
  std::map<std::string, std::vector<std::string>> lists;  // every value of a repeatable flag
  std::set<std::string> switches;
  std::vector<std::string> positionals;

  bool Has(const std::string& flag) const { return switches.count(flag) != 0; }
  std::optional<std::string> Value(const std::string& flag) const;
  std::vector<std::string> Values(const std::string& flag) const;
};

// Parses `args` against `syntax`. `--` ends flag parsing; `--flag=value` is accepted for value
// flags. Errors: INVALID_ARGUMENT (reason USAGE) naming the problem: an unknown flag, a missing
// value, a switch given a value, a missing required operand or alternative, two alternatives
// that exclude each other, or a surplus positional.
absl::StatusOr<LocalArgs> ParseArgs(const std::vector<std::string>& args,
                                    const std::vector<Arg>& syntax);

// The argument part of a usage line: "NAME (--manifest DIR_OR_FILE | --kind BUILTIN)".
std::string Synopsis(const std::vector<Arg>& syntax);

// "--selector, -l SEL" / "NAME...": how --help and the man page name an argument.
std::string ArgLabel(const Arg& arg);

// The socket ktctl uses when --socket is not given: KTESIO_SOCKET, else the daemon's user-mode
// default ($XDG_RUNTIME_DIR/ktesio/ktesiod.sock, else <state dir>/ktesiod.sock).
std::string DefaultSocketPath();

}  // namespace ktesio::cli
