#include "cli/args.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::cli {
namespace {

absl::Status UsageError(std::string_view message) {
  return contract::MakeError(absl::StatusCode::kInvalidArgument, "USAGE", message);
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

std::optional<std::string> LocalArgs::Value(const std::string& flag) const {
  auto it = values.find(flag);
  if (it == values.end()) {
    return std::nullopt;
  }
  return it->second;
}

absl::StatusOr<Invocation> ParseInvocation(const std::vector<std::string>& args) {
  Invocation inv;
  bool after_dashdash = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (after_dashdash) {
      inv.words.push_back(arg);
      continue;
    }
    if (arg == "--") {
      after_dashdash = true;
      inv.words.push_back(arg);
      continue;
    }
    std::string flag = arg;
    std::optional<std::string> inline_value;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    const bool stop_window = flag == "--timeout" && inv.words.size() >= 2 &&
                             inv.words[0] == "agent" &&
                             (inv.words[1] == "stop" || inv.words[1] == "restart");
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (inline_value.has_value()) {
        return *inline_value;
      }
      if (i + 1 >= args.size()) {
        return UsageError(absl::StrCat(flag, " needs a value"));
      }
      return args[++i];
    };
    if (flag == "--json" && !inline_value) {
      inv.global.json = true;
    } else if ((flag == "--help" || flag == "-h") && !inline_value) {
      inv.global.help = true;
    } else if (flag == "--version" && !inline_value) {
      inv.global.version = true;
    } else if (flag == "--socket") {
      KT_ASSIGN_OR_RETURN(std::string v, value());
      if (v.empty()) {
        return UsageError("--socket needs a non-empty path");
      }
      inv.global.socket = v;
    } else if (flag == "--timeout" && !stop_window) {
      KT_ASSIGN_OR_RETURN(std::string v, value());
      double seconds = 0;
      if (!absl::SimpleAtod(v, &seconds) || !(seconds > 0) || seconds > 86400) {
        return UsageError(
            absl::StrCat("--timeout must be a number of seconds in (0, 86400], got '", v, "'"));
      }
      inv.global.timeout_seconds = seconds;
    } else {
      inv.words.push_back(arg);
    }
  }
  return inv;
}

absl::StatusOr<LocalArgs> ParseLocal(const std::vector<std::string>& args,
                                     const std::set<std::string>& value_flags,
                                     const std::set<std::string>& switch_flags,
                                     size_t min_positionals, size_t max_positionals) {
  LocalArgs out;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!flags_done && arg == "--") {
      flags_done = true;
      continue;
    }
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      out.positionals.push_back(arg);
      continue;
    }
    std::string flag = arg;
    std::optional<std::string> inline_value;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    if (value_flags.count(flag) != 0) {
      if (inline_value.has_value()) {
        out.values[flag] = *inline_value;
      } else if (i + 1 < args.size()) {
        out.values[flag] = args[++i];
      } else {
        return UsageError(absl::StrCat(flag, " needs a value"));
      }
    } else if (switch_flags.count(flag) != 0 && !inline_value.has_value()) {
      out.switches.insert(flag);
    } else {
      return UsageError(absl::StrCat("unknown flag '", arg, "'"));
    }
  }
  if (out.positionals.size() < min_positionals) {
    return UsageError("missing argument");
  }
  if (out.positionals.size() > max_positionals) {
    return UsageError(absl::StrCat("unexpected argument '", out.positionals[max_positionals], "'"));
  }
  return out;
}

std::string DefaultSocketPath() {
  std::string socket = Env("KTESIO_SOCKET");
  if (!socket.empty()) {
    return socket;
  }
  std::string runtime = Env("XDG_RUNTIME_DIR");
  if (!runtime.empty() && runtime.front() == '/') {
    return runtime + "/ktesio/ktesiod.sock";
  }
  std::string state = Env("KTESIO_STATE_DIR");
  if (state.empty() || state.front() != '/') {
    std::string xdg = Env("XDG_DATA_HOME");
    state =
        !xdg.empty() && xdg.front() == '/' ? xdg + "/ktesio" : Env("HOME") + "/.local/share/ktesio";
  }
  return state + "/ktesiod.sock";
}

}  // namespace ktesio::cli
