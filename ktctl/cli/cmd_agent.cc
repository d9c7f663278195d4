// ktctl agent ...: the registry and the lifecycle.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/app.h"
#include "cli/batch.h"
#include "cli/exit_codes.h"
#include "cli/manifest_file.h"
#include "cli/output.h"
#include "cli/render.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/labels.h"
#include "ktesio/contract/limits.h"
#include "ktesio/contract/utf8.h"

namespace ktesio::cli {
namespace {

// `agent stop|restart --timeout SECS`: the command's own graceful window (not the global RPC
// deadline, see ParseInvocation).
constexpr Arg kStopTimeoutArg{
    .name = "--timeout",
    .value = "SECS",
    .help = "graceful window before SIGKILL, 0..86400 (default: the daemon's stop_timeout_secs)"};

std::string AbsolutePath(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) != nullptr) {
    return resolved;
  }
  return path;
}

int Register(Context& ctx, const LocalArgs& args) {
  std::optional<std::string> manifest = args.Value("--manifest");
  std::optional<std::string> kind = args.Value("--kind");  // exactly one: the syntax says so
  v1::RegisterAgentRequest request;
  request.set_name(args.positionals[0]);
  if (kind.has_value()) {
    request.set_builtin_kind(*kind);
  } else {
    absl::StatusOr<ManifestText> text = ReadManifestFile(*manifest);
    if (!text.ok()) {
      const bool missing = text.status().code() == absl::StatusCode::kNotFound;
      return ReportError(ctx.global.json, contract::ErrorReason(text.status()),
                         std::string(text.status().message()),
                         missing ? kExitNotFound : kExitGeneral);
    }
    request.mutable_manifest()->set_path(AbsolutePath(text->path));
    request.mutable_manifest()->set_content(std::move(text->content));
  }
  v1::RegisterAgentResponse response;
  if (const int code =
          ctx.Call(&Client::agents, &v1::AgentService::Stub::RegisterAgent, request, &response);
      code != kExitOk) {
    return code;
  }
  if (ctx.global.json) {
    Out(ShowDocument(response.instance()));
  } else {
    Out(absl::StrCat("registered ", response.instance().name(), " (kind ",
                     response.instance().kind(), ")\nhome: ", response.instance().agent_home(),
                     "\n\n", CapabilityTable(response.instance())));
  }
  return kExitOk;
}

int List(Context& ctx, const LocalArgs& args) {
  ListOptions options;
  options.show_labels = args.Has("--show-labels");
  for (const std::string& keys : args.Values("-L")) {  // -L a,b and -L a -L b alike
    bool any = false;
    for (absl::string_view key : absl::StrSplit(keys, ',', absl::SkipEmpty())) {
      any = true;
      if (absl::Status valid = contract::ValidateLabelKey(std::string_view(key.data(), key.size()));
          !valid.ok()) {
        return ctx.Usage(absl::StrCat("-L: ", valid.message()));
      }
      if (std::find(options.label_columns.begin(), options.label_columns.end(), key) ==
          options.label_columns.end()) {
        options.label_columns.emplace_back(key);
      }
    }
    if (!any) {
      return ctx.Usage("-L needs label keys (-L KEY[,KEY...])");
    }
  }
  v1::ListAgentsRequest request;
  request.set_selector(args.Value("--selector").value_or(""));
  v1::ListAgentsResponse response;
  if (const int code =
          ctx.Call(&Client::agents, &v1::AgentService::Stub::ListAgents, request, &response);
      code != kExitOk) {
    return code;
  }
  Out(ctx.global.json ? ListDocument(response, options) : ListTable(response, options));
  return kExitOk;
}

int Label(Context& ctx, const LocalArgs& args) {
  const std::vector<std::string> edits(args.positionals.begin() + 1, args.positionals.end());
  absl::StatusOr<contract::LabelEdit> edit = contract::ParseLabelEdits(edits);
  if (!edit.ok()) {
    return ReportError(ctx.global.json, contract::ErrorReason(edit.status()),
                       std::string(edit.status().message()), kExitUsage);
  }
  v1::LabelAgentRequest request;
  request.set_name(args.positionals[0]);
  request.mutable_set()->insert(edit->set.begin(), edit->set.end());
  for (const std::string& key : edit->remove) {
    request.add_remove(key);
  }
  v1::LabelAgentResponse response;
  if (const int code =
          ctx.Call(&Client::agents, &v1::AgentService::Stub::LabelAgent, request, &response);
      code != kExitOk) {
    return code;
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("instance").String(request.name());
    json.Key("changed").Bool(response.changed()).Key("labels");
    WriteLabels(json, response.instance());
    json.EndObject();
    Out(json.Take() + "\n");
  } else {
    Out(absl::StrCat(request.name(), response.changed() ? ": labels " : ": labels unchanged ",
                     LabelsText(response.instance()), "\n"));
  }
  return kExitOk;
}

int Show(Context& ctx, const LocalArgs& args) {
  v1::GetAgentRequest request;
  request.set_name(args.positionals[0]);
  v1::GetAgentResponse response;
  if (const int code =
          ctx.Call(&Client::agents, &v1::AgentService::Stub::GetAgent, request, &response);
      code != kExitOk) {
    return code;
  }
  Out(ctx.global.json ? ShowDocument(response.instance()) : ShowText(response.instance()));
  return kExitOk;
}

int Remove(Context& ctx, const LocalArgs& args) {
  const Targets targets = TargetsFrom(args);
  if (!targets.Single()) {
    BatchOptions options;
    options.delete_home = args.Has("--delete");
    options.force = args.Has("--force");
    return RunBatch(ctx, v1::BATCH_VERB_REMOVE, targets, options);
  }
  v1::RemoveAgentRequest request;
  request.set_name(args.positionals[0]);
  request.set_delete_home(args.Has("--delete"));
  request.set_force(args.Has("--force"));
  v1::RemoveAgentResponse response;
  if (const int code =
          ctx.Call(&Client::agents, &v1::AgentService::Stub::RemoveAgent, request, &response);
      code != kExitOk) {
    return code;
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("instance").String(response.name());
    json.Key("agent_home").String(response.agent_home());
    json.Key("home_deleted").Bool(response.home_deleted()).EndObject();
    Out(json.Take() + "\n");
  } else {
    Out(absl::StrCat("removed ", response.name(), "; home ",
                     response.home_deleted() ? "deleted: " : "retained: ", response.agent_home(),
                     "\n"));
  }
  return kExitOk;
}

void PrintNotices(const google::protobuf::RepeatedPtrField<std::string>& notices) {
  for (const std::string& notice : notices) {
    Err(absl::StrCat("ktctl: note: ", notice));
  }
}

int ReportInstance(Context& ctx, const v1::AgentInstance& instance, bool started = false) {
  if (ctx.global.json) {
    Out(ShowDocument(instance));
  } else {
    Out(absl::StrCat(instance.name(), ": ", StateName(instance.state()),
                     instance.cause().empty() ? "" : absl::StrCat(" (", instance.cause(), ")"),
                     "\n"));
  }
  // A start that ended in `failed` is a launch failure (exit 1), even though the call succeeded.
  if (started && instance.state() == v1::AGENT_STATE_FAILED) {
    if (!ctx.global.json) {  // the agent's own words are in its log, not in the cause
      Err(absl::StrCat("ktctl: note: what the agent printed: ktctl agent logs ", instance.name(),
                       " --tail 20"));
    }
    return kExitGeneral;
  }
  return kExitOk;
}

// start / pause / resume: one instance, or many through one batch call.
template <typename Request, typename Response>
int Lifecycle(Context& ctx, const LocalArgs& args, std::string_view verb,
              grpc::Status (v1::AgentService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                          Response*),
              v1::BatchVerb batch_verb) {
  const Targets targets = TargetsFrom(args);
  if (!targets.Single()) {
    return RunBatch(ctx, batch_verb, targets, {});
  }
  Request request;
  request.set_name(args.positionals[0]);
  Response response;
  if (const int code = ctx.Call(&Client::agents, rpc, request, &response); code != kExitOk) {
    return code;
  }
  PrintNotices(response.notices());
  return ReportInstance(ctx, response.instance(), verb == "start");
}

// The deadline of a stop-like call: it must outlive the stop window plus the 5 s kill
// confirmation. Without --timeout the window is the daemon's (stop_timeout_secs, at most 86400 s):
// the daemon always answers within it, so the client waits as long.
std::unique_ptr<grpc::ClientContext> StopContext(Context& ctx, Client& client,
                                                 std::optional<uint32_t> window) {
  const double base = ctx.global.timeout_seconds.value_or(30);
  const double needed = static_cast<double>(window.value_or(86400)) + 15;
  return client.NewContext(
      std::chrono::milliseconds(static_cast<int64_t>(std::max(base, needed) * 1000)));
}

// `agent stop --all`: the fleet stop. Exit 0 when every instance acted on ended stopped (or
// failed), 4 otherwise.
int StopAll(Context& ctx, std::optional<uint32_t> window) {
  v1::StopAllAgentsRequest request;
  if (window.has_value()) {
    request.set_timeout_seconds(*window);
  }
  int code = 0;
  Client* client = ctx.Connect(&code);
  if (client == nullptr) {
    return code;
  }
  v1::StopAllAgentsResponse response;
  auto call = StopContext(ctx, *client, window);
  grpc::Status status = client->agents().StopAllAgents(call.get(), request, &response);
  if (!status.ok()) {
    return ctx.Fail(status);
  }
  bool all_down = true;
  std::string text;
  for (const v1::AgentInstance& instance : response.instances()) {
    all_down = all_down && (instance.state() == v1::AGENT_STATE_STOPPED ||
                            instance.state() == v1::AGENT_STATE_FAILED);
    absl::StrAppend(&text, instance.name(), ": ", StateName(instance.state()),
                    instance.cause().empty() ? "" : absl::StrCat(" (", instance.cause(), ")"),
                    "\n");
  }
  if (ctx.global.json) {
    Out(StopAllDocument(response));
  } else {
    PrintNotices(response.notices());
    Out(response.instances().empty() ? std::string("no running or paused agent\n") : text);
  }
  return all_down ? kExitOk : kExitInvalidState;
}

// stop / restart: NAME [--timeout SECS] (the graceful window before SIGKILL); stop also takes
// --all instead of NAME.
template <typename Request, typename Response>
int Stopping(Context& ctx, const LocalArgs& args, std::string_view verb,
             grpc::Status (v1::AgentService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                         Response*)) {
  const bool stop = verb == "stop";
  const Targets targets = TargetsFrom(args);
  const bool all = targets.all;
  std::optional<uint32_t> window;
  if (std::optional<std::string> timeout = args.Value("--timeout")) {
    uint32_t seconds = 0;
    if (!absl::SimpleAtoi(*timeout, &seconds) || seconds > 86400) {
      return ctx.Usage(
          absl::StrCat("--timeout must be whole seconds 0..86400, got '", *timeout, "'"));
    }
    window = seconds;
  }
  if (all && stop) {
    return StopAll(ctx, window);  // the fleet stop: every running or paused instance
  }
  if (!targets.Single()) {
    BatchOptions options;
    options.timeout_seconds = window;
    return RunBatch(ctx, stop ? v1::BATCH_VERB_STOP : v1::BATCH_VERB_RESTART, targets, options);
  }
  Request request;
  request.set_name(args.positionals[0]);
  if (window.has_value()) {
    request.set_timeout_seconds(*window);
  }
  int code = 0;
  Client* client = ctx.Connect(&code);
  if (client == nullptr) {
    return code;
  }
  Response response;
  auto call = StopContext(ctx, *client, window);
  grpc::Status status = (client->agents().*rpc)(call.get(), request, &response);
  if (!status.ok()) {
    return ctx.Fail(status);
  }
  PrintNotices(response.notices());
  return ReportInstance(ctx, response.instance(), verb == "restart");
}

int Send(Context& ctx, const LocalArgs& args) {
  v1::SendInputRequest request;
  request.set_name(args.positionals[0]);
  if (args.Has("--stdin")) {  // TEXT or --stdin, exactly one: the syntax says so
    // Bounded: `--stdin < /dev/zero` has no line end.
    std::string line;
    for (int c;
         line.size() <= contract::kMaxSendBytes && (c = std::cin.get()) != EOF && c != '\n';) {
      line.push_back(static_cast<char>(c));
    }
    request.set_text(line);
  } else {
    request.set_text(args.positionals[1]);
  }
  if (request.text().find('\n') != std::string::npos) {
    return ctx.Usage("TEXT must be one line");
  }
  if (request.text().size() > contract::kMaxSendBytes) {
    return ctx.Usage(absl::StrCat("TEXT is longer than ", contract::kMaxSendBytes, " bytes"));
  }
  if (std::optional<size_t> bad = contract::FirstInvalidUtf8(request.text())) {
    return ctx.Usage(absl::StrCat("TEXT is not valid UTF-8 (byte ", *bad, ")"));
  }
  v1::SendInputResponse response;
  if (const int code =
          ctx.Call(&Client::agents, &v1::AgentService::Stub::SendInput, request, &response);
      code != kExitOk) {
    return code;
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("instance").String(request.name());
    json.Key("bytes_written").Uint(response.bytes_written()).EndObject();
    Out(json.Take() + "\n");
  }
  PrintNotices(response.notices());
  return kExitOk;
}

}  // namespace

// The agent commands' rows of the one command table: declarative data (path, summary, operands,
// flags, handler per command), so its length (~85 lines) is stated rather than split: a row
// read whole is the command's whole interface.
void AddAgentCommands(std::vector<Command>& commands) {
  using Stub = v1::AgentService::Stub;
  commands.push_back({{"agent", "register"},
                      "register an Agent Instance from an adapter.toml or a builtin kind",
                      {{.name = "NAME", .help = "the new instance's name", .need = Arg::kRequired},
                       {.name = "--manifest",
                        .value = "DIR_OR_FILE",
                        .help = "an adapter.toml, or a directory holding one",
                        .need = Arg::kRequired,
                        .group = 1},
                       {.name = "--kind",
                        .value = "BUILTIN",
                        .help = "a builtin adapter kind: hermes or mock",
                        .need = Arg::kRequired,
                        .group = 1}},
                      Register});
  commands.push_back(
      {{"agent", "list"},
       "every instance (or those a label selector matches) with state, budget, usage; labels on "
       "request",
       {kSelectorArg,
        {.name = "--show-labels", .help = "add a LABELS column (JSON: always present)"},
        {.name = "-L",
         .value = "KEY[,KEY...]",
         .help = "add one column per label key; repeatable",
         .alias = "--label-columns",
         .repeatable = true}},
       List});
  commands.push_back({{"agent", "label"},
                      "set (KEY=VALUE) and remove (KEY-) labels of an instance",
                      {{.name = "NAME", .help = "the instance", .need = Arg::kRequired},
                       {.name = "KEY=VALUE|KEY-...",
                        .help = "labels to set (KEY=VALUE) and to remove (KEY-)",
                        .need = Arg::kRequired}},
                      Label});
  commands.push_back({{"agent", "show"},
                      "one instance in detail",
                      {{.name = "NAME", .help = "the instance", .need = Arg::kRequired}},
                      Show});
  commands.push_back({{"agent", "start"},
                      "start; returns once running or failed (several at once, concurrently)",
                      TargetArgs(Arg::kRequired),
                      [](Context& c, const LocalArgs& a) {
                        return Lifecycle(c, a, "start", &Stub::StartAgent, v1::BATCH_VERB_START);
                      }});
  commands.push_back(
      {{"agent", "stop"},
       "stop: graceful, then SIGKILL to the whole group after SECS (default: the daemon's "
       "stop_timeout_secs, 30); --all stops every running or paused agent at once",
       TargetArgs(Arg::kRequired, {kStopTimeoutArg}),
       [](Context& c, const LocalArgs& a) { return Stopping(c, a, "stop", &Stub::StopAgent); }});
  commands.push_back({{"agent", "restart"},
                      "stop then start",
                      TargetArgs(Arg::kRequired, {kStopTimeoutArg}),
                      [](Context& c, const LocalArgs& a) {
                        return Stopping(c, a, "restart", &Stub::RestartAgent);
                      }});
  commands.push_back({{"agent", "pause"},
                      "freeze per the declared pause capability",
                      TargetArgs(Arg::kRequired),
                      [](Context& c, const LocalArgs& a) {
                        return Lifecycle(c, a, "pause", &Stub::PauseAgent, v1::BATCH_VERB_PAUSE);
                      }});
  commands.push_back({{"agent", "resume"},
                      "resume a paused instance",
                      TargetArgs(Arg::kRequired),
                      [](Context& c, const LocalArgs& a) {
                        return Lifecycle(c, a, "resume", &Stub::ResumeAgent, v1::BATCH_VERB_RESUME);
                      }});
  commands.push_back(
      {{"agent", "send"},
       "write one line to the agent's stdin",
       {{.name = "NAME", .help = "the instance", .need = Arg::kRequired},
        {.name = "TEXT", .help = "the line to write", .need = Arg::kRequired, .group = 1},
        {.name = "--stdin",
         .help = "read the line from stdin instead",
         .need = Arg::kRequired,
         .group = 1}},
       Send});
  commands.push_back(
      {{"agent", "remove"},
       "unregister; retain (default) or delete the Agent Home",
       TargetArgs(Arg::kRequired,
                  {{.name = "--retain", .help = "keep the Agent Home (the default)", .group = 2},
                   {.name = "--delete", .help = "delete the Agent Home", .group = 2},
                   {.name = "--force",
                    .help = "stop a running or paused instance first (wait for one starting or "
                            "stopping)"}}),
       Remove});
}

}  // namespace ktesio::cli
