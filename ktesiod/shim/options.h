#pragma once

// Command line of ktesio-shim. The daemon builds it; a malformed one is a daemon bug, so the
// parser is strict (unknown flags, duplicates and out-of-range numbers are errors, exit 64).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ktesio::daemon::shim {

inline constexpr int kExitUsage = 64;
inline constexpr std::uint64_t kDefaultMaxBytes = 10485760;
inline constexpr std::uint64_t kMinMaxBytes = 4096;
inline constexpr int kDefaultKeep = 3;

struct Options {
  std::string run_dir;
  std::string log_dir;
  std::string cwd;
  bool stdin_fifo = false;
  std::uint64_t max_bytes = kDefaultMaxBytes;
  int keep = kDefaultKeep;
  int ready_fd = -1;  // -1: no handshake.
  std::string usage_file;
  std::vector<std::string> command;  // EXEC, then its arguments.
};

struct ParseResult {
  std::optional<Options> options;  // Set on success.
  bool help = false;               // --help was given; print UsageText() and exit 0.
  std::string error;               // Why parsing failed, when neither of the above.
};

// Parses the arguments after argv[0]. Accepts `--flag value` and `--flag=value`.
ParseResult ParseOptions(const std::vector<std::string_view>& args);

std::string_view UsageText();

}  // namespace ktesio::daemon::shim
