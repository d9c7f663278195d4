// ktctl agent logs, agent usage, events: reading what the daemon observed.

#include <algorithm>
#include <limits>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cli/app.h"
#include "cli/batch.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/render.h"
#include "ktesio/contract/json_writer.h"

namespace ktesio::cli {
namespace {

std::string StreamName(v1::LogStream stream) {
  switch (stream) {
    case v1::LOG_STREAM_AGENT_OUT:
      return "agent-out";
    case v1::LOG_STREAM_AGENT_ERR:
      return "agent-err";
    case v1::LOG_STREAM_ENGINE:
      return "engine";
    default:
      return "unknown";
  }
}

// `prefix`: lines of several instances are prefixed with the instance name, padded to `width`
// ("web-1 | ..."), like docker compose logs.
template <typename Lines>
void PrintLines(const Context& ctx, const Lines& lines, bool prefix = false, size_t width = 0) {
  std::string out;
  for (const v1::LogLine& line : lines) {
    if (ctx.global.json) {
      contract::JsonWriter json;
      json.BeginObject().Key("schema_version").Int(1).Key("instance").String(line.instance());
      json.Key("stream").String(StreamName(line.stream()));
      json.Key("at").String(FormatTime(line.at_unix_ms())).Key("text").String(line.text());
      json.EndObject();
      absl::StrAppend(&out, json.str(), "\n");
    } else {
      if (prefix) {
        absl::StrAppend(
            &out, line.instance(),
            std::string(width > line.instance().size() ? width - line.instance().size() : 0, ' '),
            " | ");
      }
      absl::StrAppend(&out, FormatTime(line.at_unix_ms()), " ", StreamName(line.stream()), " ",
                      line.text(), "\n");
    }
  }
  Out(out);
}

// --since: RFC 3339 (2026-11-30T15:00:00Z) or a duration back from now (10m, 2h, 30s).
std::optional<int64_t> ParseSince(const std::string& text) {
  absl::Time time;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, text, &time, &error)) {
    return absl::ToUnixMillis(time);
  }
  absl::Duration ago;
  if (absl::ParseDuration(text, &ago) && ago >= absl::ZeroDuration()) {
    return absl::ToUnixMillis(absl::Now() - ago);
  }
  return std::nullopt;
}

size_t Widest(const std::vector<std::string>& names) {
  size_t width = 0;
  for (const std::string& name : names) {
    width = std::max(width, name.size());
  }
  return width;
}

// Retained lines of several instances, merged in time order, each prefixed with its instance.
int ReadMany(Context& ctx, Client& client, const v1::LogFilter& filter,
             const std::vector<std::string>& names) {
  std::vector<v1::LogLine> merged;
  int worst = kExitOk;
  for (const std::string& name : names) {
    v1::ReadLogsRequest request;
    *request.mutable_filter() = filter;
    request.mutable_filter()->set_name(name);
    v1::ReadLogsResponse response;
    auto call = client.NewContext();
    grpc::Status status = client.logs().ReadLogs(call.get(), request, &response);
    if (!status.ok()) {
      worst = std::max(worst, ctx.Fail(status));
      continue;
    }
    merged.insert(merged.end(), response.lines().begin(), response.lines().end());
  }
  std::stable_sort(merged.begin(), merged.end(), [](const v1::LogLine& a, const v1::LogLine& b) {
    return a.at_unix_ms() < b.at_unix_ms();
  });
  PrintLines(ctx, merged, true, Widest(names));
  return worst;
}

// Follows several instances at once, one stream each (each line prefixed with its instance).
// Each stream's first message holds its retained lines (FollowLogsResponse.retained): those of
// every instance are merged in time order and printed first, then live lines as they come. Ends
// when every stream has ended, or on Ctrl-C.
int FollowMany(Context& ctx, Client& client, const v1::LogFilter& filter,
               const std::vector<std::string>& names) {
  absl::Mutex mu;
  int worst = kExitOk;
  const size_t width = Widest(names);
  size_t pending = names.size();  // streams whose retained lines have not arrived
  bool live = false;              // the merged retained lines are out: print as lines come
  std::vector<v1::LogLine> retained;
  std::vector<std::string> notes;  // end notes that came with retained lines
  std::vector<std::thread> threads;
  for (const std::string& name : names) {
    threads.emplace_back([&, name] {
      v1::FollowLogsRequest request;
      *request.mutable_filter() = filter;
      request.mutable_filter()->set_name(name);
      grpc::ClientContext call;
      std::unique_ptr<grpc::ClientReader<v1::FollowLogsResponse>> reader =
          client.logs().FollowLogs(&call, request);
      v1::FollowLogsResponse response;
      bool first = true;
      while (reader->Read(&response)) {
        absl::MutexLock lock(&mu);
        if (first) {
          first = false;
          --pending;
          if (response.retained() && !live) {
            retained.insert(retained.end(), response.lines().begin(), response.lines().end());
            if (!response.end_note().empty()) {
              notes.push_back(absl::StrCat("ktctl: ", name, ": ", response.end_note()));
            }
            mu.Await(absl::Condition(&live));
            continue;
          }
          // A daemon without the field (all of it is live), or retained lines later than the
          // merge waited for: printed as they come.
          mu.Await(absl::Condition(&live));
        }
        PrintLines(ctx, response.lines(), true, width);
        if (!response.end_note().empty()) {
          Err(absl::StrCat("ktctl: ", name, ": ", response.end_note()));
        }
      }
      grpc::Status status = reader->Finish();
      absl::MutexLock lock(&mu);
      if (first) {
        --pending;  // ended before its first message
      }
      if (!status.ok()) {
        worst = std::max(worst, ctx.Fail(status));
      }
    });
  }
  {
    absl::MutexLock lock(&mu);
    // Every stream sends its retained lines at once; a daemon that predates the field sends
    // nothing until there is output, so the merge does not wait for it for long.
    mu.AwaitWithTimeout(absl::Condition(
                            +[](size_t* left) { return *left == 0; }, &pending),
                        absl::Seconds(5));
    std::stable_sort(
        retained.begin(), retained.end(),
        [](const v1::LogLine& a, const v1::LogLine& b) { return a.at_unix_ms() < b.at_unix_ms(); });
    PrintLines(ctx, retained, true, width);
    for (const std::string& note : notes) {
      Err(note);
    }
    live = true;
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  return worst;
}

int Logs(Context& ctx, const LocalArgs& args) {
  const Targets targets = TargetsFrom(args);
  v1::LogFilter filter;
  if (targets.Single()) {
    filter.set_name(targets.names[0]);
  }
  if (std::optional<std::string> tail = args.Value("--tail")) {
    uint32_t n = 0;
    if (!absl::SimpleAtoi(*tail, &n)) {
      return ctx.Usage(absl::StrCat("--tail takes a line count, got '", *tail, "'"));
    }
    filter.set_tail(n);
    filter.set_no_retained(n == 0);  // like tail -n 0: nothing retained, only what follows
  }
  if (std::optional<std::string> since = args.Value("--since")) {
    std::optional<int64_t> ms = ParseSince(*since);
    if (!ms.has_value()) {
      return ctx.Usage(absl::StrCat("--since takes an RFC 3339 time or a duration like 10m, got '",
                                    *since, "'"));
    }
    filter.set_since_unix_ms(*ms);
  }
  if (std::optional<std::string> stream = args.Value("--stream")) {
    if (*stream == "out") {
      filter.set_stream(v1::LOG_STREAM_AGENT_OUT);
    } else if (*stream == "err") {
      filter.set_stream(v1::LOG_STREAM_AGENT_ERR);
    } else if (*stream == "engine") {
      filter.set_stream(v1::LOG_STREAM_ENGINE);
    } else {
      return ctx.Usage(absl::StrCat("--stream is out, err or engine, got '", *stream, "'"));
    }
  }
  int code = 0;
  Client* client = ctx.Connect(&code);
  if (client == nullptr) {
    return code;
  }
  const bool follow = args.Has("-f");
  if (!targets.Single()) {
    std::optional<std::vector<std::string>> names = ResolveNames(ctx, *client, targets, &code);
    if (!names.has_value()) {
      return code;
    }
    return follow ? FollowMany(ctx, *client, filter, *names)
                  : ReadMany(ctx, *client, filter, *names);
  }
  if (!follow) {
    v1::ReadLogsRequest request;
    *request.mutable_filter() = filter;
    v1::ReadLogsResponse response;
    auto call = client->NewContext();
    grpc::Status status = client->logs().ReadLogs(call.get(), request, &response);
    if (!status.ok()) {
      return ctx.Fail(status);
    }
    PrintLines(ctx, response.lines());
    return kExitOk;
  }
  v1::FollowLogsRequest request;
  *request.mutable_filter() = filter;
  grpc::ClientContext call;  // no deadline: follows until the agent leaves running or Ctrl-C
  std::unique_ptr<grpc::ClientReader<v1::FollowLogsResponse>> reader =
      client->logs().FollowLogs(&call, request);
  v1::FollowLogsResponse response;
  while (reader->Read(&response)) {
    PrintLines(ctx, response.lines());
    if (!response.end_note().empty()) {
      Err(absl::StrCat("ktctl: ", response.end_note()));
    }
  }
  grpc::Status status = reader->Finish();
  return status.ok() ? kExitOk : ctx.Fail(status);
}

// One NDJSON line: the schema_version 1 payload with the event's `type` and `cursor` in front
// (the cursor is what a client resumes from with --since).
std::string EventLine(const v1::Event& event) {
  contract::JsonWriter head;
  head.BeginObject().Key("type").String(event.type()).Key("cursor").Uint(event.cursor());
  std::string line = head.Take();  // `{"type":...,"cursor":N` — still open
  const std::string& payload = event.payload_json();
  if (payload.size() > 2 && payload.front() == '{') {
    line += "," + payload.substr(1);
  } else {
    line += "}";
  }
  return line;
}

int Events(Context& ctx, const LocalArgs& args) {
  v1::SubscribeEventsRequest request;
  if (std::optional<std::string> since = args.Value("--since")) {
    int64_t cursor = 0;  // cursors are signed 64-bit rowids
    if (!absl::SimpleAtoi(*since, &cursor) || cursor < 0) {
      return ctx.Usage(absl::StrCat("--since takes a cursor number from 0 to ",
                                    std::numeric_limits<int64_t>::max(), ", got '", *since, "'"));
    }
    request.set_since_cursor(static_cast<uint64_t>(cursor));
  }
  request.set_audit(args.Has("--audit"));
  // Names (operands or --instance, as often as wanted), a selector, or --all (every instance,
  // as with no selection at all).
  Targets targets = TargetsFrom(args);
  for (const std::string& name : args.Values("--instance")) {
    targets.names.push_back(name);
  }
  std::sort(targets.names.begin(), targets.names.end());
  targets.names.erase(std::unique(targets.names.begin(), targets.names.end()), targets.names.end());
  int code = 0;
  Client* client = ctx.Connect(&code);
  if (client == nullptr) {
    return code;
  }
  std::optional<std::set<std::string>> only;
  if (targets.Single()) {
    request.set_instance(targets.names[0]);  // the daemon filters (and judges the name)
  } else if (!targets.names.empty() || !targets.selector.empty()) {
    // Each name must be registered, as with one; a selector is resolved once, at the start: the
    // stream shows events of the instances it matched then (docs/commands.md).
    for (const std::string& name : targets.names) {
      v1::GetAgentRequest get;
      get.set_name(name);
      v1::GetAgentResponse got;
      auto call = client->NewContext();
      if (grpc::Status status = client->agents().GetAgent(call.get(), get, &got); !status.ok()) {
        return ctx.Fail(status);
      }
    }
    std::optional<std::vector<std::string>> names = ResolveNames(ctx, *client, targets, &code);
    if (!names.has_value()) {
      return code;
    }
    only.emplace(names->begin(), names->end());
  }
  grpc::ClientContext call;
  std::unique_ptr<grpc::ClientReader<v1::SubscribeEventsResponse>> reader =
      client->events().SubscribeEvents(&call, request);
  v1::SubscribeEventsResponse response;
  uint64_t last = 0;
  while (reader->Read(&response)) {
    if (!response.notice().empty()) {
      Err(absl::StrCat("ktctl: note: ", response.notice()));
    }
    std::string out;
    for (const v1::Event& event : response.events()) {
      last = event.cursor();
      if (only.has_value() && only->count(event.instance()) == 0) {
        continue;
      }
      if (ctx.global.json) {
        absl::StrAppend(&out, EventLine(event), "\n");
      } else {
        absl::StrAppend(&out, event.cursor(), " ", FormatTime(event.at_unix_ms()), " ",
                        event.type(), " ", event.instance(), " ", event.payload_json(), "\n");
      }
    }
    Out(out);
    if (response.lagged()) {
      Err(absl::StrCat("ktctl: fell behind the event stream; resume with --since ", last));
      return kExitGeneral;
    }
  }
  grpc::Status status = reader->Finish();
  return status.ok() ? kExitOk : ctx.Fail(status);
}

std::string UsageLine(const std::string& name, const v1::UsageView& u) {
  return absl::StrCat(
      name, ": ", u.cumulative_input_tokens(), " input / ", u.cumulative_output_tokens(),
      " output tokens (current run ", u.current_run_input_tokens(), " / ",
      u.current_run_output_tokens(), ")",
      u.has_cumulative_dollars() ? absl::StrCat(", ", FormatDollars(u.cumulative_dollars())) : "",
      u.unknown_usage_calls() > 0
          ? absl::StrCat(", ", u.unknown_usage_calls(),
                         u.unknown_usage_calls() == 1 ? " call" : " calls", " with unknown usage")
          : "",
      "\n");
}

// Usage of several instances: one line each, or a JSON array of the per-instance documents.
int UsageMany(Context& ctx, Client& client, const std::vector<std::string>& names) {
  int worst = kExitOk;
  std::string text;
  contract::JsonWriter json;
  json.BeginArray();
  for (const std::string& name : names) {
    v1::GetUsageRequest request;
    request.set_name(name);
    v1::GetUsageResponse response;
    auto call = client.NewContext();
    grpc::Status status = client.agents().GetUsage(call.get(), request, &response);
    if (!status.ok()) {
      CallError error = ToCallError(status, client.socket_path());
      worst = std::max(worst, error.exit_code);
      absl::StrAppend(&text, name, ": error: ", error.message, "\n");
      json.BeginObject().Key("schema_version").Int(2).Key("instance").String(name);
      json.Key("error").BeginObject().Key("reason").String(error.reason);
      json.Key("message").String(error.message).EndObject().EndObject();
      continue;
    }
    absl::StrAppend(&text, UsageLine(name, response.usage()));
    json.BeginObject().Key("schema_version").Int(2).Key("instance").String(name).Key("usage");
    WriteUsageView(json, response.usage());
    json.EndObject();
  }
  json.EndArray();
  Out(ctx.global.json ? json.Take() + "\n" : text);
  return worst;
}

int Usage(Context& ctx, const LocalArgs& args) {
  int code = 0;
  if (args.positionals.size() > 1 || args.Has("--all") || args.Value("--selector")) {
    const Targets targets = TargetsFrom(args);
    Client* client = ctx.Connect(&code);
    if (client == nullptr) {
      return code;
    }
    std::optional<std::vector<std::string>> names = ResolveNames(ctx, *client, targets, &code);
    return names.has_value() ? UsageMany(ctx, *client, *names) : code;
  }
  v1::GetUsageRequest request;
  if (!args.positionals.empty()) {
    request.set_name(args.positionals[0]);
  }
  v1::GetUsageResponse response;
  if (const int failed =
          ctx.Call(&Client::agents, &v1::AgentService::Stub::GetUsage, request, &response);
      failed != kExitOk) {
    return failed;
  }
  contract::JsonWriter json;
  json.BeginObject().Key("schema_version").Int(2);
  if (!request.name().empty()) {
    json.Key("instance").String(request.name()).Key("usage");
    WriteUsageView(json, response.usage());
  } else {
    json.Key("totals");
    WriteFleetTotals(json, response.totals());
  }
  json.EndObject();
  if (ctx.global.json) {
    Out(json.Take() + "\n");
  } else if (!request.name().empty()) {
    const v1::UsageView& u = response.usage();
    Out(absl::StrCat(
        request.name(), ": ", u.cumulative_input_tokens(), " input / ",
        u.cumulative_output_tokens(), " output tokens (current run ", u.current_run_input_tokens(),
        " / ", u.current_run_output_tokens(), ")",
        u.has_cumulative_dollars() ? absl::StrCat(", ", FormatDollars(u.cumulative_dollars())) : "",
        u.unknown_usage_calls() > 0
            ? absl::StrCat(", ", u.unknown_usage_calls(),
                           u.unknown_usage_calls() == 1 ? " call" : " calls", " with unknown usage")
            : "",
        "\n"));
  } else {
    const v1::FleetTotals& t = response.totals();
    Out(absl::StrCat(
        "Fleet: ", t.total_input_tokens(), " input / ", t.total_output_tokens(), " output tokens",
        t.has_total_dollars() ? absl::StrCat(", ", FormatDollars(t.total_dollars())) : "", "\n"));
  }
  return kExitOk;
}

}  // namespace

// The arguments of `agent logs` and its alias `logs`.
std::vector<Arg> LogsArgs() {
  return TargetArgs(
      Arg::kRequired,
      {{.name = "-f",
        .help = "follow live output until the agent leaves running",
        .alias = "--follow"},
       {.name = "--tail", .value = "N", .help = "only the last N retained lines (0: none)"},
       {.name = "--since",
        .value = "T",
        .help = "lines from T on: an RFC 3339 time or a duration ago (10m, 2h)"},
       {.name = "--stream", .value = "out|err|engine", .help = "only one stream"}});
}

void AddObserveCommands(std::vector<Command>& commands) {
  commands.push_back({{"agent", "logs"},
                      "retained output; -f follows live output until the agent leaves running "
                      "(several instances: interleaved, each line prefixed with its name)",
                      LogsArgs(),
                      Logs});
  commands.push_back(
      {{"logs"}, "the same as `agent logs` (as in `docker compose logs`)", LogsArgs(), Logs});
  commands.push_back({{"agent", "usage"},
                      "token usage of one instance, of several (one line each), or the Fleet",
                      TargetArgs(Arg::kOptional),
                      Usage});
  std::vector<Arg> events_args =
      TargetArgs(Arg::kOptional,
                 {{.name = "--instance",
                   .value = "NAME",
                   .help = "only this instance's events (repeatable; the same as a NAME operand)",
                   .group = 1,
                   .combinable = true,
                   .repeatable = true},
                  {.name = "--since",
                   .value = "CURSOR",
                   .help = "resume after this cursor (0: from the start)"},
                  {.name = "--audit", .help = "the audit trail of API calls instead of events"}});
  commands.push_back({{"events"},
                      "the event stream, resumable from a cursor; --audit: the audit trail instead",
                      events_args,
                      Events});
}

}  // namespace ktesio::cli
