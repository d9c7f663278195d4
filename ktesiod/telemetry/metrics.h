#pragma once

// The Prometheus exposition of the daemon (text format 0.0.4): what it renders is a plain
// snapshot taken on the engine thread in one go, so a scrape shows the numbers `ktctl agent list
// --json` would have shown at that instant. Rendering is pure and runs on the metrics thread.
//
// Names follow Prometheus practice: one `ktesio_` prefix, base units (seconds, bytes, dollars),
// `_total` for counters, bounded label values (instance names are bounded by max_instances), no
// host label (the scraper adds `instance`).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "ktesio/v1/agent.pb.h"
#include "telemetry/histogram.h"
#include "telemetry/proc_stats.h"

namespace ktesio::daemon::telemetry {

struct AgentCounters {
  uint64_t known_calls = 0;    // engine-observed calls whose usage the provider reported
  uint64_t unknown_calls = 0;  // engine-observed calls without usage
  std::map<std::string, uint64_t> breaches_by_action;  // "pause" | "stop" | "warn"
};

// What the metering proxy measured for one engine-observed instance.
struct ProxyFigures {
  LatencyHistogram added_before_first_byte;
  std::map<std::string, uint64_t> upstream_errors;  // by reason
};

// The GenAI semantic conventions' gen_ai.client.token.usage for the calls one instance made
// through its metering proxy, per token type, provider and operation.
struct GenAiTokenUsage {
  std::string agent;
  std::string provider;    // gen_ai.provider.name: "openai" | "anthropic"
  std::string operation;   // gen_ai.operation.name: "chat"
  std::string token_type;  // gen_ai.token.type: "input" | "output"
  std::string model;       // gen_ai.request.model, "" when not known
  TokenHistogram tokens;
};

struct ApiRequestCount {
  std::string rpc;   // "ktesio.v1.AgentService/StartAgent"
  std::string code;  // "OK", "NOT_FOUND", ...
  uint64_t count = 0;
};

struct MetricsSnapshot {
  std::string daemon_version, api_version, contract_version;
  double daemon_start_time_seconds = 0;
  v1::ListAgentsResponse agents;  // with resources filled where the agent has processes
  std::map<std::string, AgentCounters> counters;  // by instance name
  std::map<std::string, ProxyFigures> proxy;      // by instance name (engine-observed only)
  std::map<std::string, uint64_t> events_by_type;
  std::vector<GenAiTokenUsage> genai;
  std::vector<ApiRequestCount> api_requests;
  SelfStats self;
};

// Where an agent's process tree is: instance `index` of MetricsSnapshot::agents, under the shim
// `pid` (verified by its start time).
struct TreeRoot {
  int index = 0;
  int pid = 0;
  uint64_t start_time = 0;
};

// Samples each root's process tree and sets the instance's `resources` (left unset when the
// tree is gone).
void FillResources(const std::vector<TreeRoot>& roots, v1::ListAgentsResponse* agents);

// The resources message of a sampled tree.
v1::ProcessStats ToProcessStats(const TreeStats& tree);

// The seven lifecycle states with their wire names, in lifecycle order.
inline constexpr std::pair<v1::AgentState, const char*> kAgentStates[] = {
    {v1::AGENT_STATE_REGISTERED, "registered"}, {v1::AGENT_STATE_STARTING, "starting"},
    {v1::AGENT_STATE_RUNNING, "running"},       {v1::AGENT_STATE_PAUSED, "paused"},
    {v1::AGENT_STATE_STOPPING, "stopping"},     {v1::AGENT_STATE_STOPPED, "stopped"},
    {v1::AGENT_STATE_FAILED, "failed"},
};

// "self-reported" | "engine-observed" | "none".
const char* MeteringSourceName(v1::MeteringSource source);

// The shortest plain decimal (no exponent) that reads back as exactly `value`; "0" for NaN and
// infinities (neither format has a use for them here).
std::string FormatDouble(double value);

// Micro-dollars as an exact decimal number of dollars ("-0.5", "12.000001").
std::string FormatMicroDollars(int64_t micros);

// The bounded class of a failed cause ("crash-loop{…}" -> "crash-loop"; unknown ones "other").
const char* CauseClass(absl::string_view cause);

// An instance's budget breaches by action, with a zero for every action when it has a budget
// (a series born at 1 would hide the first breach from increase()), and its metering proxy's
// upstream errors by reason, a zero for every reason when it is engine-observed. Both exports
// expose the same series.
std::map<std::string, uint64_t> BreachesByAction(const MetricsSnapshot& s,
                                                 const v1::AgentInstance& a);
std::map<std::string, uint64_t> UpstreamErrorsByReason(const MetricsSnapshot& s,
                                                       const v1::AgentInstance& a);

// Renders `snapshot` as Prometheus text exposition format 0.0.4.
std::string RenderPrometheus(const MetricsSnapshot& snapshot);

// The content type of that format.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace ktesio::daemon::telemetry
