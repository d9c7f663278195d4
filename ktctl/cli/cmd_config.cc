// ktctl agent config ..., ktctl secret ..., ktctl agent memory ...

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "cli/app.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/render.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/limits.h"
#include "ktesio/contract/utf8.h"

namespace ktesio::cli {
namespace {

using contract::kMaxSecretBytes;

void PrintNotices(const google::protobuf::RepeatedPtrField<std::string>& notices) {
  for (const std::string& notice : notices) {
    Err(absl::StrCat("ktctl: note: ", notice));
  }
}

// A config value as JSON: a number or a boolean where the daemon typed it so (and the text has
// that form: anything else, e.g. from a faulty server, stays a string), a string otherwise.
void WriteValue(contract::JsonWriter& json, const v1::ConfigEntry& entry) {
  const std::string& value = entry.value();
  if (entry.value_type() == v1::CONFIG_VALUE_TYPE_INTEGER && !value.empty() && value.size() <= 20 &&
      value.find_first_not_of("0123456789") == std::string::npos &&
      (value.size() == 1 || value.front() != '0')) {
    json.Raw(value);
  } else if (entry.value_type() == v1::CONFIG_VALUE_TYPE_BOOLEAN &&
             (value == "true" || value == "false")) {
    json.Bool(value == "true");
  } else {
    json.String(value);
  }
}

int ConfigSet(Context& ctx, const LocalArgs& args) {
  v1::SetConfigRequest request;
  request.set_name(args.positionals[0]);
  request.set_key(args.positionals[1]);
  request.set_value(args.positionals[2]);
  v1::SetConfigResponse response;
  if (const int code =
          ctx.Call(&Client::config, &v1::ConfigService::Stub::SetConfig, request, &response);
      code != kExitOk) {
    return code;
  }
  PrintNotices(response.notices());
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("entry").BeginObject();
    json.Key("key").String(response.entry().key()).Key("value");
    WriteValue(json, response.entry());
    json.Key("source").String(response.entry().source());
    json.Key("unvalidated").Bool(response.entry().unvalidated()).EndObject().EndObject();
    Out(json.Take() + "\n");
  } else {
    Out(absl::StrCat(response.entry().key(), " = ", TerminalText(response.entry().value()), "\n"));
  }
  return kExitOk;
}

int ConfigGet(Context& ctx, const LocalArgs& args) {
  v1::GetConfigRequest request;
  request.set_name(args.positionals[0]);
  if (args.positionals.size() == 2) {
    request.set_key(args.positionals[1]);
  }
  request.set_reveal(args.Has("--reveal"));
  v1::GetConfigResponse response;
  if (const int code =
          ctx.Call(&Client::config, &v1::ConfigService::Stub::GetConfig, request, &response);
      code != kExitOk) {
    return code;
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("entries").BeginArray();
    for (const v1::ConfigEntry& entry : response.entries()) {
      json.BeginObject().Key("key").String(entry.key()).Key("value");
      WriteValue(json, entry);
      json.Key("source").String(entry.source()).Key("unvalidated").Bool(entry.unvalidated());
      json.EndObject();
    }
    json.EndArray().EndObject();
    Out(json.Take() + "\n");
    return kExitOk;
  }
  size_t width = 3;
  for (const v1::ConfigEntry& entry : response.entries()) {
    width = std::max(width, entry.key().size());
  }
  std::string out;
  for (const v1::ConfigEntry& entry : response.entries()) {
    absl::StrAppend(&out, entry.key(), std::string(width - entry.key().size() + 2, ' '),
                    TerminalText(entry.value()), "  (", entry.source(),
                    entry.unvalidated() ? ", unvalidated" : "", ")\n");
  }
  Out(out);
  return kExitOk;
}

int ConfigUnset(Context& ctx, const LocalArgs& args) {
  v1::UnsetConfigRequest request;
  request.set_name(args.positionals[0]);
  request.set_key(args.positionals[1]);
  v1::UnsetConfigResponse response;
  if (const int code =
          ctx.Call(&Client::config, &v1::ConfigService::Stub::UnsetConfig, request, &response);
      code != kExitOk) {
    return code;
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("removed").Bool(response.removed());
    json.EndObject();
    Out(json.Take() + "\n");
  } else if (!response.removed()) {
    Err(absl::StrCat("ktctl: note: ", request.key(), " was not set"));
  }
  return kExitOk;
}

int SecretSet(Context& ctx, const LocalArgs& args) {
  // The daemon keeps at most kMaxSecretBytes; reading stops just past that (plus a line end), so
  // `--from-file /dev/zero` is refused instead of filling memory.
  constexpr size_t kReadAtMost = kMaxSecretBytes + 3;
  std::string value(kReadAtMost, '\0');
  if (std::optional<std::string> path = args.Value("--from-file")) {
    std::error_code ec;
    if (std::filesystem::is_directory(*path, ec)) {  // opens, then every read fails: "empty"
      return ReportError(ctx.global.json, "IO_ERROR",
                         absl::StrCat("cannot read ", TerminalText(*path), ": it is a directory"),
                         kExitGeneral);
    }
    std::ifstream file(*path, std::ios::binary);
    if (!file) {
      return ReportError(
          ctx.global.json, "IO_ERROR",
          absl::StrCat("cannot read ", TerminalText(*path), ": ", std::strerror(errno)),
          kExitGeneral);
    }
    file.read(value.data(), static_cast<std::streamsize>(value.size()));
    if (file.bad()) {
      return ReportError(
          ctx.global.json, "IO_ERROR",
          absl::StrCat("cannot read ", TerminalText(*path), ": ", std::strerror(errno)),
          kExitGeneral);
    }
    value.resize(static_cast<size_t>(file.gcount()));
  } else {
    if (isatty(STDIN_FILENO)) {
      Err("ktctl: reading the secret from stdin (end with Ctrl-D)");
    }
    std::cin.read(value.data(), static_cast<std::streamsize>(value.size()));
    value.resize(static_cast<size_t>(std::cin.gcount()));
  }
  if (std::optional<size_t> bad = contract::FirstInvalidUtf8(value)) {
    return ctx.Usage(
        absl::StrCat("the secret value is not valid UTF-8 (byte ", *bad, "); secrets are text"));
  }
  // One trailing newline is how shells and editors end a value, not part of it.
  if (!value.empty() && value.back() == '\n') {
    value.pop_back();
    if (!value.empty() && value.back() == '\r') {
      value.pop_back();
    }
  }
  if (value.size() > kMaxSecretBytes) {
    return ctx.Usage(absl::StrCat("the secret value is longer than ", kMaxSecretBytes, " bytes"));
  }
  v1::SetSecretRequest request;
  request.set_name(args.positionals[0]);
  request.set_value(value);
  v1::SetSecretResponse response;
  if (const int code =
          ctx.Call(&Client::secrets, &v1::SecretService::Stub::SetSecret, request, &response);
      code != kExitOk) {
    return code;
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("name").String(response.name());
    json.Key("replaced").Bool(response.replaced()).EndObject();
    Out(json.Take() + "\n");
  } else {
    Out(absl::StrCat(response.replaced() ? "replaced" : "stored", " secret ", response.name(),
                     "\n"));
  }
  return kExitOk;
}

int SecretList(Context& ctx, const LocalArgs& /*args*/) {
  v1::ListSecretsResponse response;
  if (const int code = ctx.Call(&Client::secrets, &v1::SecretService::Stub::ListSecrets,
                                v1::ListSecretsRequest(), &response);
      code != kExitOk) {
    return code;
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("names").BeginArray();
    for (const std::string& name : response.names()) {
      json.String(name);
    }
    json.EndArray().EndObject();
    Out(json.Take() + "\n");
  } else {
    std::string out;
    for (const std::string& name : response.names()) {
      absl::StrAppend(&out, name, "\n");
    }
    Out(out);
  }
  return kExitOk;
}

int SecretRemove(Context& ctx, const LocalArgs& args) {
  v1::RemoveSecretRequest request;
  request.set_name(args.positionals[0]);
  v1::RemoveSecretResponse response;
  if (const int code =
          ctx.Call(&Client::secrets, &v1::SecretService::Stub::RemoveSecret, request, &response);
      code != kExitOk) {
    return code;
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("name").String(response.name());
    json.EndObject();
    Out(json.Take() + "\n");
  }
  return kExitOk;
}

int MemoryAttach(Context& ctx, const LocalArgs& args) {
  std::optional<std::string> kind = args.Value("--kind");
  v1::AttachMemoryRequest request;
  request.set_name(args.positionals[0]);
  if (kind == "filesystem") {
    request.set_kind(v1::MEMORY_KIND_FILESYSTEM);
  } else if (kind == "native") {
    request.set_kind(v1::MEMORY_KIND_NATIVE);
  } else {
    return ReportError(
        ctx.global.json, "UNKNOWN_MEMORY_KIND",
        absl::StrCat("unknown memory kind '", kind.value_or(""), "' (filesystem | native)"),
        kExitUsage);
  }
  v1::AttachMemoryResponse response;
  if (const int code =
          ctx.Call(&Client::agents, &v1::AgentService::Stub::AttachMemory, request, &response);
      code != kExitOk) {
    return code;
  }
  PrintNotices(response.notices());
  const v1::MemoryBacking& m = response.memory();
  const std::string kind_wire = m.kind() == v1::MEMORY_KIND_FILESYSTEM ? "filesystem" : "native";
  const std::string guarantee = m.guarantee() == v1::MEMORY_GUARANTEE_MANAGED_DIR_BYTE_DURABLE
                                    ? "managed_dir_byte_durable"
                                    : "home_persistence_only";
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("instance").String(response.name());
    json.Key("kind").String(kind_wire).Key("guarantee").String(guarantee);
    json.Key("dir").String(m.dir()).Key("declared").Bool(m.declared()).EndObject();
    Out(json.Take() + "\n");
  } else {
    Out(absl::StrCat("attached ", kind_wire, " memory to ", response.name(), " (", guarantee,
                     m.dir().empty() ? "" : absl::StrCat(", ", m.dir()), ")\n"));
  }
  return kExitOk;
}

int MemoryDetach(Context& ctx, const LocalArgs& args) {
  v1::DetachMemoryRequest request;
  request.set_name(args.positionals[0]);
  v1::DetachMemoryResponse response;
  if (const int code =
          ctx.Call(&Client::agents, &v1::AgentService::Stub::DetachMemory, request, &response);
      code != kExitOk) {
    return code;
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("instance").String(response.name());
    json.EndObject();
    Out(json.Take() + "\n");
  } else {
    Out(absl::StrCat("detached memory from ", response.name(), " (the directory is kept)\n"));
  }
  return kExitOk;
}

}  // namespace

void AddConfigCommands(std::vector<Command>& commands) {
  constexpr Arg kName{.name = "NAME", .help = "the instance", .need = Arg::kRequired};
  commands.push_back(
      {{"agent", "config", "set"},
       "validate and set one key in the instance layer",
       {kName,
        {.name = "KEY",
         .help = "a unified key (model, budget.*, cost.*, restart.*, ...) or agent.<tail>",
         .need = Arg::kRequired},
        {.name = "VALUE",
         .help = "the value (secret:NAME refers to a stored secret)",
         .need = Arg::kRequired}},
       ConfigSet});
  commands.push_back(
      {{"agent", "config", "get"},
       "effective config with each value's source layer",
       {kName,
        {.name = "KEY", .help = "only this key"},
        {.name = "--reveal", .help = "show secret values instead of redacting them"}},
       ConfigGet});
  commands.push_back({{"agent", "config", "unset"},
                      "remove one key from the instance layer",
                      {kName, {.name = "KEY", .help = "the key to remove", .need = Arg::kRequired}},
                      ConfigUnset});
  commands.push_back({{"agent", "memory", "attach"},
                      "attach a Memory Backing (registered, stopped or failed only)",
                      {kName,
                       {.name = "--kind",
                        .value = "filesystem|native",
                        .help = "the backing kind",
                        .need = Arg::kRequired}},
                      MemoryAttach});
  commands.push_back({{"agent", "memory", "detach"},
                      "detach the Memory Backing (metadata only)",
                      {kName},
                      MemoryDetach});
  commands.push_back(
      {{"secret", "set"},
       "store a secret; the value is read from stdin, never from argv",
       {{.name = "NAME", .help = "the secret's name", .need = Arg::kRequired},
        {.name = "--from-file", .value = "PATH", .help = "read the value from PATH instead"}},
       SecretSet});
  commands.push_back({{"secret", "list"}, "secret names (never values)", {}, SecretList});
  commands.push_back({{"secret", "rm"},
                      "remove a secret",
                      {{.name = "NAME", .help = "the secret's name", .need = Arg::kRequired}},
                      SecretRemove});
}

}  // namespace ktesio::cli
