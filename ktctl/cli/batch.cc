#include "cli/batch.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/render.h"
#include "ktesio/contract/json_writer.h"

namespace ktesio::cli {
namespace {

// The exit code one result stands for, as the single-instance command would exit.
int ResultCode(v1::BatchVerb verb, const v1::BatchResult& result) {
  if (!result.ok()) {
    return ExitCodeFor(result.error().reason(), grpc::StatusCode::UNKNOWN);
  }
  const bool starts = verb == v1::BATCH_VERB_START || verb == v1::BATCH_VERB_RESTART;
  if (starts && result.instance().state() == v1::AGENT_STATE_FAILED) {
    return kExitGeneral;  // a start that ended failed is a launch failure
  }
  return kExitOk;
}

std::string ResultLine(const v1::BatchResult& result, v1::BatchVerb verb) {
  if (!result.ok()) {
    return absl::StrCat(result.name(), ": error: ", result.error().message(), "\n");
  }
  std::string line;
  if (verb == v1::BATCH_VERB_REMOVE) {
    line = absl::StrCat(result.name(), ": removed");
  } else {
    const v1::AgentInstance& instance = result.instance();
    line = absl::StrCat(result.name(), ": ", StateName(instance.state()),
                        instance.cause().empty() ? "" : absl::StrCat(" (", instance.cause(), ")"));
  }
  for (const std::string& notice : result.notices()) {
    absl::StrAppend(&line, "; ", notice);
  }
  return line + "\n";
}

void WriteResult(contract::JsonWriter& json, v1::BatchVerb verb, const v1::BatchResult& result) {
  json.BeginObject().Key("schema_version").Int(1).Key("instance").String(result.name());
  json.Key("ok").Bool(result.ok()).Key("exit_code").Int(ResultCode(verb, result));
  if (result.has_instance()) {  // optional keys are omitted (docs/json.md)
    json.Key("state").String(StateName(result.instance().state()));
    json.Key("cause").String(result.instance().cause());
  }
  if (!result.ok()) {
    json.Key("error").BeginObject().Key("reason").String(result.error().reason());
    json.Key("message").String(result.error().message()).EndObject();
  }
  json.Key("notices").BeginArray();
  for (const std::string& notice : result.notices()) {
    json.String(notice);
  }
  json.EndArray().EndObject();
}

}  // namespace

std::vector<Arg> TargetArgs(Arg::Need need, std::vector<Arg> more) {
  Arg selector = kSelectorArg;
  selector.need = need;
  selector.group = 1;
  selector.combinable = true;
  std::vector<Arg> args = {
      {.name = "NAME...",
       .help = "one or more instance names",
       .need = need,
       .group = 1,
       .combinable = true},
      selector,
      {.name = "--all", .help = "every registered instance", .need = need, .group = 1}};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

Targets TargetsFrom(const LocalArgs& local) {
  Targets targets;
  targets.names = local.positionals;
  targets.selector = local.Value("--selector").value_or("");
  targets.all = local.Has("--all");
  return targets;
}

int RunBatch(Context& ctx, v1::BatchVerb verb, const Targets& targets,
             const BatchOptions& options) {
  v1::BatchAgentsRequest request;
  request.set_verb(verb);
  for (const std::string& name : targets.names) {
    request.add_names(name);
  }
  request.set_selector(targets.selector);
  request.set_all(targets.all);
  if (options.timeout_seconds.has_value()) {
    request.set_timeout_seconds(*options.timeout_seconds);
  }
  request.set_delete_home(options.delete_home);
  request.set_force(options.force);
  int code = 0;
  Client* client = ctx.Connect(&code);
  if (client == nullptr) {
    return code;
  }
  // Stops wait for their window plus the kill confirmation; starts for every agent's readiness.
  const double base = ctx.global.timeout_seconds.value_or(30);
  const double needed = static_cast<double>(options.timeout_seconds.value_or(86400)) + 15;
  auto call = client->NewContext(
      std::chrono::milliseconds(static_cast<int64_t>(std::max(base, needed) * 1000)));
  v1::BatchAgentsResponse response;
  grpc::Status status = client->agents().BatchAgents(call.get(), request, &response);
  if (!status.ok()) {
    return ctx.Fail(status);
  }
  int worst = kExitOk;
  std::string text;
  contract::JsonWriter json;
  json.BeginArray();
  for (const v1::BatchResult& result : response.results()) {
    worst = std::max(worst, ResultCode(verb, result));
    absl::StrAppend(&text, ResultLine(result, verb));
    WriteResult(json, verb, result);
  }
  json.EndArray();
  Out(ctx.global.json ? json.Take() + "\n" : text);
  return worst;
}

std::optional<std::vector<std::string>> ResolveNames(Context& ctx, Client& client,
                                                     const Targets& targets, int* exit_code) {
  std::set<std::string> names(targets.names.begin(), targets.names.end());
  if (targets.all || !targets.selector.empty()) {
    v1::ListAgentsRequest request;
    request.set_selector(targets.selector);
    request.set_skip_resources(true);
    v1::ListAgentsResponse response;
    auto call = client.NewContext();
    grpc::Status status = client.agents().ListAgents(call.get(), request, &response);
    if (!status.ok()) {
      *exit_code = ctx.Fail(status);
      return std::nullopt;
    }
    for (const v1::AgentInstance& instance : response.instances()) {
      names.insert(instance.name());
    }
    if (names.empty()) {
      *exit_code = ReportError(
          ctx.global.json, "NO_MATCH",
          targets.all
              ? std::string("there are no Agent Instances")
              : absl::StrCat("no Agent Instance matches the selector '", targets.selector, "'"),
          kExitNotFound);
      return std::nullopt;
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

}  // namespace ktesio::cli
