#include "options.h"

#include <array>
#include <charconv>
#include <limits>

namespace ktesio::daemon::shim {
namespace {

constexpr std::string_view kUsage =
    "usage: ktesio-shim --run-dir DIR --log-dir DIR --cwd DIR [--stdin-fifo] [--max-bytes N]\n"
    "                   [--keep N] [--ready-fd FD] [--usage-file PATH] -- EXEC [ARGS...]\n"
    "       ktesio-shim --launcher   (started by ktesiod, its socket on fd 3)\n";

std::optional<std::uint64_t> ParseNumber(std::string_view text) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return std::nullopt;
  }
  return value;
}

// Stores one flag's value into `o`; returns an error message, or "" on success.
std::string ApplyValue(std::string_view flag, std::string_view value, Options* o) {
  if (flag == "--run-dir" || flag == "--log-dir" || flag == "--cwd" || flag == "--usage-file") {
    if (value.empty()) {
      return std::string(flag) + " must not be empty";
    }
    std::string* target = flag == "--run-dir"   ? &o->run_dir
                          : flag == "--log-dir" ? &o->log_dir
                          : flag == "--cwd"     ? &o->cwd
                                                : &o->usage_file;
    target->assign(value);
    return "";
  }
  std::optional<std::uint64_t> number = ParseNumber(value);
  if (!number) {
    return std::string(flag) + " needs a non-negative decimal number, got '" + std::string(value) +
           "'";
  }
  constexpr std::uint64_t kIntMax = std::numeric_limits<int>::max();
  if (flag == "--max-bytes") {
    if (*number < kMinMaxBytes) {
      return "--max-bytes must be at least " + std::to_string(kMinMaxBytes);
    }
    o->max_bytes = *number;
  } else if (flag == "--keep") {
    if (*number < 1 || *number > kIntMax) {
      return "--keep must be between 1 and " + std::to_string(kIntMax);
    }
    o->keep = static_cast<int>(*number);
  } else {  // --ready-fd
    if (*number < 3 || *number > kIntMax) {
      return "--ready-fd must be a descriptor number >= 3";
    }
    o->ready_fd = static_cast<int>(*number);
  }
  return "";
}

// The known flags: the seven of TakesValue and --stdin-fifo.
constexpr std::size_t kMaxFlags = 8;

bool TakesValue(std::string_view flag) {
  return flag == "--run-dir" || flag == "--log-dir" || flag == "--cwd" || flag == "--max-bytes" ||
         flag == "--keep" || flag == "--ready-fd" || flag == "--usage-file";
}

ParseResult Fail(std::string message) {
  ParseResult result;
  result.error = std::move(message);
  return result;
}

}  // namespace

ParseResult ParseOptions(const std::vector<std::string_view>& args) {
  Options o;
  // The flags given so far, on the stack: each is a known flag given once, or parsing has failed.
  // (A forked shim writes every heap page it allocates in: docs/shim.md, "Footprint".)
  std::array<std::string_view, kMaxFlags> seen;
  std::size_t seen_count = 0;
  std::size_t i = 0;
  for (; i < args.size() && args[i] != "--"; ++i) {
    std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      ParseResult result;
      result.help = true;
      return result;
    }
    std::size_t eq = arg.find('=');
    std::string_view flag = arg.substr(0, eq);
    if (!TakesValue(flag) && flag != "--stdin-fifo") {
      return Fail("unknown argument '" + std::string(arg) + "'");
    }
    for (std::size_t k = 0; k < seen_count; ++k) {
      if (seen[k] == flag) {
        return Fail(std::string(flag) + " given twice");
      }
    }
    if (seen_count == seen.size()) {
      return Fail("more flags than ktesio-shim knows");  // kMaxFlags out of date
    }
    seen[seen_count++] = flag;
    if (flag == "--stdin-fifo") {
      if (eq != std::string_view::npos) {
        return Fail("--stdin-fifo takes no value");
      }
      o.stdin_fifo = true;
      continue;
    }
    std::string_view value;
    if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size() && args[i + 1] != "--") {
      value = args[++i];
    } else {
      return Fail(std::string(flag) + " needs a value");
    }
    if (std::string error = ApplyValue(flag, value, &o); !error.empty()) {
      return Fail(std::move(error));
    }
  }
  if (o.run_dir.empty() || o.log_dir.empty() || o.cwd.empty()) {
    return Fail("--run-dir, --log-dir and --cwd are required");
  }
  if (i + 1 >= args.size()) {
    return Fail("missing '-- EXEC [ARGS...]'");
  }
  if (args[i + 1].empty()) {
    return Fail("EXEC must not be empty");
  }
  o.command.reserve(args.size() - i - 1);
  for (++i; i < args.size(); ++i) {
    o.command.emplace_back(args[i]);
  }
  ParseResult result;
  result.options = std::move(o);
  return result;
}

std::string_view UsageText() { return kUsage; }

}  // namespace ktesio::daemon::shim
