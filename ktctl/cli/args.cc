#include "cli/args.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
    if (inline_value && (flag == "--json" || flag == "--help" || flag == "--version")) {
      return UsageError(absl::StrCat(flag, " takes no value"));
    }
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

namespace {

const Arg* FindFlag(const std::vector<Arg>& syntax, std::string_view flag) {
  for (const Arg& arg : syntax) {
    if (arg.IsFlag() && (arg.name == flag || (!arg.alias.empty() && arg.alias == flag))) {
      return &arg;
    }
  }
  return nullptr;
}

// How an argument is named in a usage line: "NAME", "--timeout SECS", "-f FILE|DIR [-f ...]"
// (without the repetition when `once`).
std::string Piece(const Arg& arg, bool once = false) {
  std::string out(arg.name);
  if (!arg.value.empty()) {
    absl::StrAppend(&out, " ", std::string(arg.value));
  }
  if (arg.repeatable && !once) {
    absl::StrAppend(&out, " [", std::string(arg.name), " ...]");
  }
  return out;
}

// Takes one flag (and its value) from args[*i]; records it in `out` and `given`.
absl::Status TakeFlag(const std::vector<std::string>& args, size_t* i,
                      const std::vector<Arg>& syntax, LocalArgs* out,
                      std::set<std::string_view>* given) {
  const std::string& token = args[*i];
  std::string flag = token;
  std::optional<std::string> inline_value;
  if (size_t eq = token.find('='); eq != std::string::npos) {
    flag = token.substr(0, eq);
    inline_value = token.substr(eq + 1);
  }
  const Arg* spec = FindFlag(syntax, flag);
  if (spec == nullptr) {
    return UsageError(absl::StrCat("unknown flag '", token, "'"));
  }
  const std::string key(spec->name);
  given->insert(spec->name);
  if (spec->value.empty()) {
    if (inline_value.has_value()) {
      return UsageError(absl::StrCat(flag, " takes no value"));
    }
    out->switches.insert(key);
    return absl::OkStatus();
  }
  if (!inline_value.has_value()) {
    if (*i + 1 >= args.size()) {
      return UsageError(absl::StrCat(flag, " needs a value (", std::string(spec->value), ")"));
    }
    inline_value = args[++*i];
  }
  if (inline_value->empty()) {
    return UsageError(
        absl::StrCat(flag, " needs a non-empty value (", std::string(spec->value), ")"));
  }
  if (auto before = out->values.find(key); !spec->join.empty() && before != out->values.end()) {
    before->second = absl::StrCat(before->second, std::string(spec->join), *inline_value);
  } else if (before != out->values.end() && !spec->repeatable) {
    // "--manifest a --manifest b" is a mistake to name, not one to settle by taking the last.
    return UsageError(absl::StrCat(std::string(spec->name), " given twice ('", before->second,
                                   "' and '", *inline_value, "'): give it once"));
  } else {
    out->values[key] = *inline_value;
  }
  if (spec->repeatable) {
    out->lists[key].push_back(*inline_value);
  }
  return absl::OkStatus();
}

// Two alternatives of one group given together, or a required argument (or alternative)
// missing.
absl::Status CheckGroups(const std::vector<Arg>& syntax, const std::set<std::string_view>& given) {
  for (size_t i = 0; i < syntax.size(); ++i) {
    const Arg& a = syntax[i];
    if (a.group == 0 || given.count(a.name) == 0) {
      continue;
    }
    for (size_t j = i + 1; j < syntax.size(); ++j) {
      const Arg& b = syntax[j];
      if (b.group == a.group && given.count(b.name) != 0 && !(a.combinable && b.combinable)) {
        return UsageError(
            absl::StrCat(std::string(a.name), " and ", std::string(b.name), " exclude each other"));
      }
    }
  }
  std::set<int> reported;
  for (const Arg& arg : syntax) {
    if (arg.need != Arg::kRequired) {
      continue;
    }
    if (arg.group == 0) {
      if (given.count(arg.name) == 0) {
        return UsageError(absl::StrCat("missing ", Piece(arg, true)));
      }
      continue;
    }
    bool any = false;
    std::vector<std::string> members;
    for (const Arg& member : syntax) {
      if (member.group == arg.group) {
        any = any || given.count(member.name) != 0;
        members.push_back(Piece(member, true));
      }
    }
    if (!any && reported.insert(arg.group).second) {
      const std::string last = members.back();
      members.pop_back();
      return UsageError(absl::StrCat("give ", absl::StrJoin(members, ", "), " or ", last));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> LocalArgs::Values(const std::string& flag) const {
  auto it = lists.find(flag);
  return it == lists.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<LocalArgs> ParseArgs(const std::vector<std::string>& args,
                                    const std::vector<Arg>& syntax) {
  LocalArgs out;
  std::set<std::string_view> given;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!flags_done && arg == "--") {
      flags_done = true;
    } else if (flags_done || arg.size() < 2 || arg[0] != '-' ||
               (arg[1] >= '0' && arg[1] <= '9')) {  // no flag starts with a digit: "-1" is a value
      out.positionals.push_back(arg);
    } else {
      KT_RETURN_IF_ERROR(TakeFlag(args, &i, syntax, &out, &given));
    }
  }
  // Operands take the positionals in order; a list operand takes the rest.
  size_t taken = 0;
  for (const Arg& arg : syntax) {
    if (arg.IsFlag() || taken == out.positionals.size()) {
      continue;
    }
    given.insert(arg.name);
    taken = arg.IsList() ? out.positionals.size() : taken + 1;
  }
  KT_RETURN_IF_ERROR(CheckGroups(syntax, given));
  if (taken < out.positionals.size()) {
    return UsageError(absl::StrCat("unexpected argument '", out.positionals[taken], "'"));
  }
  return out;
}

std::string Synopsis(const std::vector<Arg>& syntax) {
  std::vector<std::string> parts;
  std::set<int> shown;
  for (const Arg& arg : syntax) {
    if (arg.group == 0) {
      const std::string piece = arg.IsFlag() ? Piece(arg) : std::string(arg.name);
      parts.push_back(arg.need == Arg::kRequired ? piece : absl::StrCat("[", piece, "]"));
      continue;
    }
    if (!shown.insert(arg.group).second) {
      continue;
    }
    std::vector<std::string> members;
    bool required = false;
    for (const Arg& member : syntax) {
      if (member.group == arg.group) {
        members.push_back(Piece(member));
        required = required || member.need == Arg::kRequired;
      }
    }
    const std::string joined = absl::StrJoin(members, " | ");
    parts.push_back(required ? absl::StrCat("(", joined, ")") : absl::StrCat("[", joined, "]"));
  }
  return absl::StrJoin(parts, " ");
}

std::string ArgLabel(const Arg& arg) {
  std::string out(arg.name);
  if (!arg.alias.empty()) {
    absl::StrAppend(&out, ", ", std::string(arg.alias));
  }
  if (!arg.value.empty()) {
    absl::StrAppend(&out, " ", std::string(arg.value));
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
