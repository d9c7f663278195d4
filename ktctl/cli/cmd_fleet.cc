// ktctl apply, diff, export: declarative fleets (docs/fleet-file.md). The daemon plans and
// carries out (FleetService); ktctl reads the files, renders the plan and picks the exit code.

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/app.h"
#include "cli/batch.h"
#include "cli/exit_codes.h"
#include "cli/fleet_files.h"
#include "cli/output.h"
#include "cli/render.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/limits.h"
#include "ktesio/contract/text.h"

namespace ktesio::cli {
namespace {

// "create", "update", ...: the enum's own name without its prefix, lower-cased.
std::string ActionName(int action) {
  const std::string& name = v1::PlanAction_Name(static_cast<v1::PlanAction>(action));
  return absl::AsciiStrToLower(name.substr(std::string_view("PLAN_ACTION_").size()));
}

// A step that started its instance (start or recreate), carried out, whose run ended `failed`: a
// launch failure, reported as one (exit 1, counted "with an error").
bool EndedFailed(const v1::PlanStep& step) {
  const auto& actions = step.actions();
  return step.ok() && step.has_instance() && step.instance().state() == v1::AGENT_STATE_FAILED &&
         (std::count(actions.begin(), actions.end(), v1::PLAN_ACTION_START) > 0 ||
          std::count(actions.begin(), actions.end(), v1::PLAN_ACTION_RECREATE) > 0);
}

void WriteStep(contract::JsonWriter& json, const v1::PlanStep& step) {
  json.BeginObject().Key("instance").String(step.name()).Key("actions").BeginArray();
  for (int action : step.actions()) {
    json.String(ActionName(action));
  }
  json.EndArray().Key("changes").BeginArray();
  for (const std::string& change : step.changes()) {
    json.String(change);
  }
  json.EndArray().Key("ok").Bool(step.ok());
  if (step.has_error()) {  // optional keys are omitted (docs/json.md)
    json.Key("error").BeginObject().Key("reason").String(step.error().reason());
    json.Key("message").String(step.error().message()).EndObject();
  }
  if (step.has_instance()) {
    json.Key("state").String(StateName(step.instance().state()));
    json.Key("cause").String(step.instance().cause());
  }
  json.Key("file").String(step.location().file()).Key("line").Uint(step.location().line());
  json.EndObject();
}

std::string PlanDocument(const v1::ApplyFleetResponse& response) {
  contract::JsonWriter json;
  json.BeginObject().Key("schema_version").Int(1).Key("applied").Bool(response.applied());
  json.Key("changed").Bool(response.changed()).Key("steps").BeginArray();
  for (const v1::PlanStep& step : response.steps()) {
    WriteStep(json, step);
  }
  json.EndArray().EndObject();
  return json.Take() + "\n";
}

std::string PlanText(const v1::ApplyFleetResponse& response) {
  std::string out;
  std::map<std::string, int> counts;
  for (const v1::PlanStep& step : response.steps()) {
    std::vector<std::string> actions;
    const bool failed = !step.ok() || EndedFailed(step);
    for (int action : step.actions()) {
      actions.push_back(ActionName(action));
      if (!failed) {
        ++counts[actions.back()];
      }
    }
    if (failed) {
      ++counts["with an error"];  // refused or failed: not counted as what it would have done
    } else if (actions.empty()) {
      ++counts["unchanged"];
    }
    absl::StrAppend(&out, step.name(), ": ",
                    actions.empty() ? std::string("unchanged") : absl::StrJoin(actions, " + "));
    if (step.has_instance() && !actions.empty()) {
      const v1::AgentInstance& instance = step.instance();
      const bool say_why = instance.state() == v1::AGENT_STATE_FAILED && !instance.cause().empty();
      absl::StrAppend(&out, " -> ", StateName(instance.state()),
                      say_why ? absl::StrCat(" (", instance.cause(), ")") : "");
    }
    out += "\n";
    for (const std::string& change : step.changes()) {
      absl::StrAppend(&out, "    ", change, "\n");
    }
    if (step.has_error()) {
      absl::StrAppend(&out, "    error: ", step.error().message(), "\n");
    } else if (EndedFailed(step)) {
      absl::StrAppend(&out, "    error: the instance was started and its run ended failed\n");
    }
  }
  std::vector<std::string> summary;
  for (const auto& [name, count] : counts) {
    summary.push_back(absl::StrCat(count, " ", name));
  }
  absl::StrAppend(&out, response.applied() ? "applied: " : "plan: ",
                  summary.empty() ? std::string("nothing declared") : absl::StrJoin(summary, ", "),
                  "\n");
  return out;
}

// The worst exit code of the steps (0 when every step is ok).
int StepsExitCode(const v1::ApplyFleetResponse& response) {
  int worst = kExitOk;
  for (const v1::PlanStep& step : response.steps()) {
    if (!step.ok()) {
      worst = std::max(worst, ExitCodeFor(step.error().reason(), grpc::StatusCode::UNKNOWN));
    } else if (EndedFailed(step)) {
      worst = std::max(worst, static_cast<int>(kExitGeneral));
    }
  }
  return worst;
}

// Sorts "file:line: ..." problems by file, then line.
void SortProblems(std::vector<std::string>* problems) {
  auto key = [](const std::string& p) {
    const size_t colon = p.find(':');
    const std::string file = p.substr(0, colon);
    uint32_t line = 0;
    if (colon != std::string::npos) {
      const size_t end = p.find(':', colon + 1);
      if (!absl::SimpleAtoi(p.substr(colon + 1, end - colon - 1), &line)) {
        line = 0;
      }
    }
    return std::make_pair(file, line);
  };
  std::stable_sort(problems->begin(), problems->end(),
                   [&](const std::string& a, const std::string& b) { return key(a) < key(b); });
}

// The files have problems ktctl found itself: ask the daemon (a dry run of what could be read)
// for the problems only it can find, and report them all at once. Nothing is applied.
int ReportProblems(Context& ctx, Client& client, v1::ApplyFleetRequest request,
                   std::vector<std::string> problems) {
  request.set_dry_run(true);
  for (v1::FleetSpec& fleet : *request.mutable_fleets()) {
    auto* instances = fleet.mutable_instances();
    instances->erase(std::remove_if(instances->begin(), instances->end(),
                                    [](const v1::FleetInstanceSpec& spec) {
                                      return spec.source_case() ==
                                             v1::FleetInstanceSpec::SOURCE_NOT_SET;
                                    }),
                     instances->end());
  }
  // No file could be read at all: the daemon could only add "no fleet given".
  grpc::Status status = grpc::Status::OK;
  if (request.fleets_size() > 0) {
    v1::ApplyFleetResponse ignored;
    auto call = client.NewContext();
    status = client.fleet().Apply(call.get(), request, &ignored);
  }
  // A long list comes back cut ("... N more lines not shown (...)", api/call.h): those count as
  // problems, and the note stays last.
  size_t not_shown = 0;
  std::string cut_note;
  if (!status.ok()) {
    CallError error = ToCallError(status, client.socket_path());
    if (error.reason == "FLEET_INVALID") {
      std::vector<std::string> lines = absl::StrSplit(error.message, '\n');
      for (size_t i = 1; i < lines.size(); ++i) {  // line 0 is the summary
        if (lines[i].starts_with("... ")) {
          std::vector<std::string> words = absl::StrSplit(lines[i], ' ');
          if (words.size() > 1 && absl::SimpleAtoi(words[1], &not_shown)) {
            cut_note = lines[i];
          }
        } else if (!lines[i].ends_with(": name is missing")) {
          problems.push_back(lines[i]);
        }
      }
    }
  }
  for (std::string& problem : problems) {  // one line each, whatever a path or name holds
    problem = contract::text::EscapeControls(problem);
  }
  SortProblems(&problems);
  problems.erase(std::unique(problems.begin(), problems.end()), problems.end());
  const size_t count = problems.size() + not_shown;
  if (!cut_note.empty()) {
    problems.push_back(cut_note);
  }
  return ReportError(
      ctx.global.json, "FLEET_INVALID",
      absl::StrCat("the fleet was not applied (nothing changed): ", count,
                   count == 1 ? " problem\n" : " problems\n", absl::StrJoin(problems, "\n")),
      kExitUsage);
}

int RunApply(Context& ctx, const LocalArgs& args, bool diff) {
  const std::vector<std::string> files = args.Values("-f");
  v1::ApplyFleetRequest request;
  request.set_dry_run(diff || args.Has("--dry-run"));
  request.set_prune(args.Has("--prune"));
  request.set_recreate(args.Has("--recreate"));
  if (std::optional<std::string> window = args.Value("--stop-timeout")) {
    uint32_t seconds = 0;
    if (!absl::SimpleAtoi(*window, &seconds) || seconds > 86400) {
      return ctx.Usage(absl::StrCat("--stop-timeout must be whole seconds 0..86400"));
    }
    request.set_timeout_seconds(seconds);
  }
  FleetFiles read = ReadFleetFiles(files);
  for (v1::FleetSpec& fleet : read.fleets) {
    *request.add_fleets() = std::move(fleet);
  }
  request.mutable_manifests()->insert(read.manifests.begin(), read.manifests.end());
  int code = 0;
  Client* client = ctx.Connect(&code);
  if (client == nullptr) {
    return code;
  }
  if (!read.problems.empty()) {
    return ReportProblems(ctx, *client, request, std::move(read.problems));
  }
  // Each file is at most 4 MiB, but many of them (and a source location per key) can make a
  // request the daemon would refuse with the transport's own message: say what to do instead.
  if (const size_t bytes = request.ByteSizeLong(); bytes > contract::kMaxRequestBytes) {
    return ReportError(
        ctx.global.json, "FLEET_INVALID",
        absl::StrCat("the fleet was not applied (nothing changed): its files make a request of ",
                     (bytes + (1 << 20) - 1) >> 20, " MiB, over the ",
                     contract::kMaxRequestBytes >> 20,
                     " MiB the daemon accepts; apply them in smaller groups"),
        kExitUsage);
  }
  // Creating and starting many agents, or stopping them, takes longer than one RPC deadline.
  auto call = client->NewContext(std::chrono::milliseconds(static_cast<int64_t>(
      ctx.global.timeout_seconds.value_or(request.dry_run() ? 60 : 3600) * 1000)));
  v1::ApplyFleetResponse response;
  grpc::Status status = client->fleet().Apply(call.get(), request, &response);
  if (!status.ok()) {
    const int failed = ctx.Fail(status);
    return diff && failed == kExitGeneral ? kExitUsage : failed;  // diff: 1 means "changes"
  }
  Out(ctx.global.json ? PlanDocument(response) : PlanText(response));
  if (diff) {
    return response.changed() ? 1 : kExitOk;
  }
  return StepsExitCode(response);
}

int Export(Context& ctx, const LocalArgs& args) {
  v1::ExportFleetRequest request;
  request.set_selector(args.Value("--selector").value_or(""));
  request.set_name(args.Value("--name").value_or(""));
  v1::ExportFleetResponse response;
  if (const int code =
          ctx.Call(&Client::fleet, &v1::FleetService::Stub::Export, request, &response);
      code != kExitOk) {
    return code;
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("toml").String(response.toml());
    json.EndObject();
    Out(json.Take() + "\n");
  } else {
    Out(response.toml());
  }
  return kExitOk;
}

}  // namespace

void AddFleetCommands(std::vector<Command>& commands) {
  constexpr Arg kFiles{.name = "-f",
                       .value = "FILE|DIR",
                       .help = "a fleet file, or a directory of them (*.toml); repeatable",
                       .need = Arg::kRequired,
                       .alias = "--filename",
                       .repeatable = true};
  constexpr Arg kPrune{
      .name = "--prune",
      .help = "also remove instances a fleet owns that its file no longer declares"};
  commands.push_back(
      {{"apply"},
       "make the host's instances what fleet files declare (plan, then carry it out); a second "
       "apply changes nothing",
       {kFiles,
        {.name = "--dry-run", .help = "print the plan only (as diff does)"},
        kPrune,
        {.name = "--recreate",
         .help = "replace an instance whose adapter changed (keeps its home)"},
        {.name = "--stop-timeout",
         .value = "SECS",
         .help = "graceful window of the stops apply makes, 0..86400"}},
       [](Context& c, const LocalArgs& a) { return RunApply(c, a, false); }});
  commands.push_back(
      {{"diff"},
       "the plan apply would carry out; exit 0 when nothing would change, 1 when something would",
       {kFiles, kPrune},
       [](Context& c, const LocalArgs& a) { return RunApply(c, a, true); }});
  commands.push_back(
      {{"export"},
       "the current instances as a fleet file (secrets as secret:NAME references)",
       {kSelectorArg, {.name = "--name", .value = "FLEET", .help = "the fleet's name in the file"}},
       Export});
}

}  // namespace ktesio::cli
