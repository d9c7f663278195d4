#include "cli/app.h"

#include <sys/un.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/render.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/suggest.h"
#include "ktesio/contract/utf8.h"
#include "ktesio/v1/version.h"

namespace ktesio::cli {
namespace {

constexpr double kDefaultTimeoutSeconds = 30;

std::string HelpText() {
  std::string out =
      "usage: ktctl [--socket PATH] [--json] [--timeout SECS] COMMAND ...\n\n"
      "Drives a running ktesiod over its API socket. Global flags may appear anywhere.\n\n"
      "commands:\n";
  for (const Command& command : Commands()) {
    std::string line = absl::StrCat("  ", command.Usage());
    if (line.size() < 58) {
      line.append(58 - line.size(), ' ');
    } else {
      line += "\n" + std::string(58, ' ');
    }
    absl::StrAppend(&out, line, std::string(command.summary), "\n");
  }
  out +=
      "\nglobal flags:\n"
      "  --socket PATH   daemon socket (default: $KTESIO_SOCKET, else the user-mode default)\n"
      "  --json          machine-readable output on stdout\n"
      "  --timeout SECS  deadline for each API call (default 30)\n"
      "  --version       client version, and the daemon's when reachable\n"
      "\nexit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 invalid state, 5 unsupported,\n"
      "            6 timed out, 7 daemon unreachable (docs/exit-codes.md)\n";
  return out;
}

// `--version`: the client's versions, and the daemon's when it answers within 2 s (never an
// error: exit 0 either way). With --json the daemon's part is omitted when unreachable.
int PrintVersion(Context& ctx) {
  Client client(ctx.socket_path, std::chrono::milliseconds(2000));
  v1::GetVersionResponse version;
  CallError error;
  const bool reachable = client.Handshake(&version, &error);
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("client").BeginObject();
    json.Key("version").String(v1::kKtesioVersion).Key("api_version").String(v1::kApiVersion);
    json.Key("contract_version").String(contract::kContractVersion).EndObject();
    json.Key("socket").String(ctx.socket_path).Key("daemon_reachable").Bool(reachable);
    if (reachable) {
      json.Key("daemon").BeginObject().Key("version").String(version.daemon_version());
      json.Key("api_version").String(version.api_version());
      json.Key("contract_version").String(version.contract_version()).EndObject();
    }
    Out(json.EndObject().Take() + "\n");
    return kExitOk;
  }
  Out(absl::StrCat("ktctl ", std::string(v1::kKtesioVersion), " (api ",
                   std::string(v1::kApiVersion), ", contract ",
                   std::string(contract::kContractVersion), ")\n"));
  if (reachable) {
    Out(absl::StrCat("ktesiod ", version.daemon_version(), " (api ", version.api_version(),
                     ", contract ", version.contract_version(), ") at ", ctx.socket_path, "\n"));
  } else {
    Out(absl::StrCat("ktesiod: not reachable at ", ctx.socket_path, "\n"));
  }
  return kExitOk;
}

// "unknown command 'agent strat x'; did you mean 'ktctl agent start x'? (see ktctl --help)":
// the command whose words are nearest to as many of the given words.
std::string UnknownCommand(const std::vector<std::string>& words) {
  std::string suggestion;
  size_t best = SIZE_MAX;
  for (const Command& command : Commands()) {
    const size_t n = command.path.size();
    if (n > words.size()) {
      continue;
    }
    const std::string given =
        absl::StrJoin(words.begin(), words.begin() + static_cast<long>(n), " ");
    const std::string path = command.Name();
    const size_t distance = contract::EditDistance(given, path);
    if (distance <= contract::SuggestionThreshold(path.size()) && distance < best) {
      best = distance;
      std::vector<std::string> rest(words.begin() + static_cast<long>(n), words.end());
      suggestion = absl::StrCat("ktctl ", path, rest.empty() ? "" : " ", absl::StrJoin(rest, " "));
    }
  }
  return absl::StrCat("unknown command '", absl::StrJoin(words, " "), "'",
                      suggestion.empty() ? "" : absl::StrCat("; did you mean '", suggestion, "'?"),
                      " (see ktctl --help)");
}

// The words matched no command. A flag among them (before "--") is what to name: a command's own
// flags follow its words, and global flags are taken anywhere, so it is unknown where it stands.
std::string UnknownCommandOrFlag(const std::vector<std::string>& words) {
  // The words without flags, and without flags and the word after each (its value, perhaps).
  std::vector<std::string> plain;
  std::vector<std::string> without_values;
  std::string flag;
  for (size_t i = 0; i < words.size() && words[i] != "--"; ++i) {
    const std::string& word = words[i];
    if (word.size() > 1 && word[0] == '-' && !(word[1] >= '0' && word[1] <= '9')) {
      flag = flag.empty() ? word : flag;
      if (word.find('=') == std::string::npos && i + 1 < words.size()) {
        plain.push_back(words[++i]);
      }
    } else {
      plain.push_back(word);
      without_values.push_back(word);
    }
  }
  if (flag.empty()) {
    return UnknownCommand(words);
  }
  const std::string name = flag.substr(0, flag.find('='));
  const auto prefixes = [](const Command& command, const std::vector<std::string>& given) {
    return command.path.size() <= given.size() &&
           std::equal(command.path.begin(), command.path.end(), given.begin());
  };
  for (const Command& command : Commands()) {
    if (prefixes(command, plain) || prefixes(command, without_values)) {
      for (const Arg& arg : command.args) {
        if (arg.IsFlag() && (arg.name == name || (!arg.alias.empty() && arg.alias == name))) {
          return absl::StrCat("flag '", flag, "' belongs after the command: ktctl ", command.Name(),
                              " ... ", flag);
        }
      }
    }
  }
  return absl::StrCat("unknown flag '", flag, "' (see ktctl --help)");
}

}  // namespace

Client* Context::Connect(int* exit_code) {
  // A longer path cannot name a Unix socket at all (sockaddr_un): gRPC's own error for it is
  // "Failed to create secure client channel", which names neither the path nor the limit.
  constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;
  if (client_ == nullptr && socket_path.size() > kMaxSocketPath) {
    *exit_code = ReportError(
        global.json, "USAGE",
        absl::StrCat("the socket path is ", socket_path.size(), " bytes, over the limit of ",
                     kMaxSocketPath, " for a Unix socket: ", TerminalText(socket_path),
                     " (use a shorter --socket or KTESIO_SOCKET)"),
        kExitUsage);
    return nullptr;
  }
  if (client_ == nullptr) {
    const double seconds = global.timeout_seconds.value_or(kDefaultTimeoutSeconds);
    auto client = std::make_unique<Client>(
        socket_path, std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
    v1::GetVersionResponse version;
    CallError error;
    if (!client->Handshake(&version, &error)) {
      *exit_code = Fail(error);
      return nullptr;
    }
    client_ = std::move(client);
  }
  return client_.get();
}

int Context::Fail(const grpc::Status& status) { return Fail(ToCallError(status, socket_path)); }

int Context::Fail(const CallError& error) {
  return ReportError(global.json, error.reason, error.message, error.exit_code);
}

int Context::Usage(std::string_view message) {
  return ReportError(global.json, "USAGE",
                     absl::StrCat(std::string(message), "\nusage: ktctl ",
                                  command == nullptr ? "" : command->Usage()),
                     kExitUsage);
}

std::string Command::Name() const {
  std::string out;
  for (std::string_view word : path) {
    out += out.empty() ? "" : " ";
    out += word;
  }
  return out;
}

std::string Command::Usage() const {
  const std::string synopsis = Synopsis(args);
  return synopsis.empty() ? Name() : absl::StrCat(Name(), " ", synopsis);
}

std::string Command::Help() const {
  std::string out = absl::StrCat("usage: ktctl ", Usage(), "\n\n", std::string(summary), "\n");
  if (!args.empty()) {
    out += "\narguments:\n";
  }
  for (const Arg& arg : args) {
    std::string line = absl::StrCat("  ", ArgLabel(arg));
    line += line.size() < 26 ? std::string(26 - line.size(), ' ') : "\n" + std::string(26, ' ');
    absl::StrAppend(&out, line, std::string(arg.help), "\n");
  }
  return out;
}

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = [] {
    std::vector<Command> all;
    AddDaemonCommands(all);
    AddAgentCommands(all);
    AddConfigCommands(all);
    AddObserveCommands(all);
    AddTopCommands(all);
    AddFleetCommands(all);
    AddCompletionCommands(all);
    AddManifestCommands(all);
    return all;
  }();
  return commands;
}

int RunCli(const std::vector<std::string>& args) {
  // Every name, key and value travels as protobuf text, which must be UTF-8: refuse other bytes
  // here, naming the argument, rather than fail obscurely at serialization.
  for (size_t i = 0; i < args.size(); ++i) {
    if (std::optional<size_t> bad = contract::FirstInvalidUtf8(args[i])) {
      const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
      return ReportError(json, "USAGE",
                         absl::StrCat("argument ", i + 1, " is not valid UTF-8 (byte ", *bad, ")"),
                         kExitUsage);
    }
  }
  absl::StatusOr<Invocation> inv = ParseInvocation(args);
  if (!inv.ok()) {
    const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
    return ReportError(json, "USAGE", std::string(inv.status().message()), kExitUsage);
  }
  Context ctx;
  ctx.global = inv->global;
  ctx.socket_path = ctx.global.socket.empty() ? DefaultSocketPath() : ctx.global.socket;
  if (ctx.global.version) {
    return PrintVersion(ctx);
  }
  const std::vector<std::string>& words = inv->words;
  // Longest command path that prefixes the words wins.
  const Command* best = nullptr;
  for (const Command& command : Commands()) {
    if (command.path.size() <= words.size() &&
        std::equal(command.path.begin(), command.path.end(), words.begin()) &&
        (best == nullptr || command.path.size() > best->path.size())) {
      best = &command;
    }
  }
  if (best == nullptr) {
    if (ctx.global.help) {
      Out(HelpText());
      return kExitOk;
    }
    if (words.empty()) {
      // No command is a usage error like any other; the text mode shows what there is to run.
      if (!ctx.global.json) {
        Err(HelpText());
      }
      return ReportError(ctx.global.json, "USAGE", "no command given (see ktctl --help)",
                         kExitUsage);
    }
    return ReportError(ctx.global.json, "USAGE", UnknownCommandOrFlag(words), kExitUsage);
  }
  if (ctx.global.help) {
    Out(best->Help());
    return kExitOk;
  }
  ctx.command = best;
  const std::vector<std::string> rest(words.begin() + static_cast<long>(best->path.size()),
                                      words.end());
  absl::StatusOr<LocalArgs> local = ParseArgs(rest, best->args);
  if (!local.ok()) {
    return ctx.Usage(std::string(local.status().message()));
  }
  return best->run(ctx, *local);
}

}  // namespace ktesio::cli
