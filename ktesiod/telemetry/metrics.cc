#include "telemetry/metrics.h"

#include <charconv>
#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace ktesio::daemon::telemetry {
namespace {

constexpr const auto& kStates = kAgentStates;

// A label value with \, " and newline escaped as the format requires.
std::string Escape(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string FormatDouble(double value) {
  if (!std::isfinite(value)) {
    return "0";
  }
  char buffer[400];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed);
  return ec == std::errc() ? std::string(buffer, end) : "NaN";
}

std::string FormatMicroDollars(int64_t micros) {
  const bool negative = micros < 0;
  const uint64_t magnitude =
      negative ? static_cast<uint64_t>(-(micros + 1)) + 1 : static_cast<uint64_t>(micros);
  std::string fraction = std::to_string(magnitude % 1'000'000);
  fraction.insert(0, 6 - fraction.size(), '0');
  while (!fraction.empty() && fraction.back() == '0') {
    fraction.pop_back();
  }
  return absl::StrCat(negative ? "-" : "", magnitude / 1'000'000, fraction.empty() ? "" : ".",
                      fraction);
}

const char* CauseClass(absl::string_view cause) {
  for (const char* known : {"crash-loop", "crashed", "launch-error", "lost", "budget-exceeded"}) {
    const absl::string_view k(known);
    if (cause.substr(0, k.size()) == k &&
        (cause.size() == k.size() || cause[k.size()] == '{' || cause[k.size()] == ' ')) {
      return known;
    }
  }
  return "other";
}

const char* MeteringSourceName(v1::MeteringSource source) {
  switch (source) {
    case v1::METERING_SOURCE_SELF_REPORTED:
      return "self-reported";
    case v1::METERING_SOURCE_ENGINE_OBSERVED:
      return "engine-observed";
    default:
      return "none";
  }
}

namespace {

class Writer {
 public:
  // Starts a family: HELP and TYPE lines.
  void Family(absl::string_view name, absl::string_view type, absl::string_view help) {
    absl::StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  // One sample; `labels` is the already-rendered `{...}` part or "".
  void Sample(absl::string_view name, absl::string_view labels, absl::string_view value) {
    absl::StrAppend(&out_, name, labels, " ", value, "\n");
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string Labels(std::initializer_list<std::pair<absl::string_view, absl::string_view>> labels) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : labels) {
    absl::StrAppend(&out, first ? "" : ",", key, "=\"", Escape(value), "\"");
    first = false;
  }
  return out + "}";
}

void RenderBudgets(const MetricsSnapshot& s, Writer& w);

void RenderDaemon(const MetricsSnapshot& s, Writer& w) {
  w.Family("ktesio_build_info", "gauge",
           "The running ktesiod: versions of the daemon, API and Adapter Contract.");
  w.Sample("ktesio_build_info",
           Labels({{"version", s.daemon_version},
                   {"api_version", s.api_version},
                   {"contract_version", s.contract_version}}),
           "1");
  w.Family("ktesio_daemon_start_time_seconds", "gauge",
           "When this daemon process started, Unix time.");
  w.Sample("ktesio_daemon_start_time_seconds", "", FormatDouble(s.daemon_start_time_seconds));
  w.Family("ktesio_agents", "gauge", "Agent instances per lifecycle state.");
  std::map<v1::AgentState, uint64_t> by_state;
  for (const v1::AgentInstance& agent : s.agents.instances()) {
    by_state[agent.state()] += 1;
  }
  for (const auto& [state, name] : kStates) {
    w.Sample("ktesio_agents", Labels({{"state", name}}), std::to_string(by_state[state]));
  }
  w.Family("ktesio_events_total", "counter", "Persisted events, by type.");
  for (const auto& [type, count] : s.events_by_type) {
    w.Sample("ktesio_events_total", Labels({{"type", type}}), std::to_string(count));
  }
  w.Family("ktesio_api_requests_total", "counter",
           "Finished API calls, by RPC and gRPC status code.");
  for (const ApiRequestCount& request : s.api_requests) {
    w.Sample("ktesio_api_requests_total", Labels({{"rpc", request.rpc}, {"code", request.code}}),
             std::to_string(request.count));
  }
}

void RenderAgents(const MetricsSnapshot& s, Writer& w) {
  const auto& agents = s.agents.instances();
  w.Family("ktesio_agent_info", "gauge", "One series per agent instance.");
  for (const v1::AgentInstance& a : agents) {
    w.Sample("ktesio_agent_info",
             Labels({{"agent", a.name()},
                     {"kind", a.kind()},
                     {"metering_source", MeteringSourceName(a.metering_source())}}),
             "1");
  }
  w.Family("ktesio_agent_state", "gauge", "1 for the state the agent is in, 0 for the others.");
  for (const v1::AgentInstance& a : agents) {
    for (const auto& [state, name] : kStates) {
      w.Sample("ktesio_agent_state", Labels({{"agent", a.name()}, {"state", name}}),
               a.state() == state ? "1" : "0");
    }
  }
  w.Family("ktesio_agent_failed", "gauge",
           "1 while the agent is failed, with the class of its cause (crash-loop: no further "
           "restart).");
  for (const v1::AgentInstance& a : agents) {
    if (a.state() == v1::AGENT_STATE_FAILED) {
      w.Sample("ktesio_agent_failed",
               Labels({{"agent", a.name()}, {"cause", CauseClass(a.failed_cause())}}), "1");
    }
  }
  w.Family("ktesio_agent_restarts_total", "counter",
           "Automatic restarts over the agent's life (an operator start does not reset it).");
  for (const v1::AgentInstance& a : agents) {
    w.Sample("ktesio_agent_restarts_total", Labels({{"agent", a.name()}}),
             std::to_string(a.restarts_total()));
  }
  w.Family("ktesio_agent_tokens_total", "counter", "Tokens in the usage ledger, over every run.");
  for (const v1::AgentInstance& a : agents) {
    w.Sample("ktesio_agent_tokens_total", Labels({{"agent", a.name()}, {"direction", "input"}}),
             std::to_string(a.usage().cumulative_input_tokens()));
    w.Sample("ktesio_agent_tokens_total", Labels({{"agent", a.name()}, {"direction", "output"}}),
             std::to_string(a.usage().cumulative_output_tokens()));
  }
  w.Family("ktesio_agent_model_calls_total", "counter",
           "Model calls seen by the metering proxy, by whether the provider reported usage.");
  for (const v1::AgentInstance& a : agents) {
    if (a.metering_source() != v1::METERING_SOURCE_ENGINE_OBSERVED) {
      continue;
    }
    auto it = s.counters.find(a.name());
    const AgentCounters counters = it == s.counters.end() ? AgentCounters{} : it->second;
    w.Sample("ktesio_agent_model_calls_total", Labels({{"agent", a.name()}, {"usage", "known"}}),
             std::to_string(counters.known_calls));
    w.Sample("ktesio_agent_model_calls_total", Labels({{"agent", a.name()}, {"usage", "unknown"}}),
             std::to_string(counters.unknown_calls));
  }
  w.Family("ktesio_agent_spend_dollars_total", "counter",
           "Estimated spend over every run, at the configured Rate (priced agents only).");
  for (const v1::AgentInstance& a : agents) {
    if (a.usage().has_cumulative_dollars()) {
      w.Sample("ktesio_agent_spend_dollars_total", Labels({{"agent", a.name()}}),
               FormatMicroDollars(a.usage().cumulative_dollars()));
    }
  }
  RenderBudgets(s, w);
}

void RenderBudgets(const MetricsSnapshot& s, Writer& w) {
  struct Line {
    std::string labels;
    std::string limit;
    std::string remaining;
  };
  std::vector<Line> lines;
  for (const v1::AgentInstance& a : s.agents.instances()) {
    if (!a.has_budget()) {
      continue;
    }
    const v1::BudgetView& b = a.budget();
    auto tokens = [&](const char* scope, bool has, uint64_t limit, uint64_t remaining) {
      if (has) {
        lines.push_back({Labels({{"agent", a.name()}, {"scope", scope}, {"dimension", "tokens"}}),
                         std::to_string(limit), std::to_string(remaining)});
      }
    };
    auto dollars = [&](const char* scope, bool has, int64_t cap, int64_t remaining) {
      if (has) {
        lines.push_back({Labels({{"agent", a.name()}, {"scope", scope}, {"dimension", "dollars"}}),
                         FormatMicroDollars(cap), FormatMicroDollars(remaining)});
      }
    };
    tokens("run", b.has_per_run_limit(), b.per_run_limit(), b.per_run_remaining());
    tokens("cumulative", b.has_cumulative_limit(), b.cumulative_limit(), b.cumulative_remaining());
    dollars("run", b.has_per_run_cost_cap(), b.per_run_cost_cap(), b.per_run_dollars_remaining());
    dollars("cumulative", b.has_cumulative_cost_cap(), b.cumulative_cost_cap(),
            b.cumulative_dollars_remaining());
  }
  w.Family("ktesio_agent_budget_limit", "gauge",
           "A budget limit in tokens or dollars, where one applies.");
  for (const Line& line : lines) {
    w.Sample("ktesio_agent_budget_limit", line.labels, line.limit);
  }
  w.Family("ktesio_agent_budget_remaining", "gauge",
           "What is left of a budget limit, in tokens or dollars (0 once reached).");
  for (const Line& line : lines) {
    w.Sample("ktesio_agent_budget_remaining", line.labels, line.remaining);
  }
  // Every action of every budgeted instance is exposed, zeros included, so increase() sees a
  // first breach (a series born at 1 would hide it).
  w.Family("ktesio_agent_budget_breaches_total", "counter",
           "Budget breaches over every run, by the action taken.");
  for (const v1::AgentInstance& a : s.agents.instances()) {
    for (const auto& [action, count] : BreachesByAction(s, a)) {
      w.Sample("ktesio_agent_budget_breaches_total",
               Labels({{"agent", a.name()}, {"action", action}}), std::to_string(count));
    }
  }
}

}  // namespace

std::map<std::string, uint64_t> BreachesByAction(const MetricsSnapshot& s,
                                                 const v1::AgentInstance& a) {
  std::map<std::string, uint64_t> by_action;
  if (a.has_budget()) {
    by_action = {{"pause", 0}, {"stop", 0}, {"warn", 0}};
  }
  if (auto it = s.counters.find(a.name()); it != s.counters.end()) {
    for (const auto& [action, count] : it->second.breaches_by_action) {
      by_action[action] = count;
    }
  }
  return by_action;
}

std::map<std::string, uint64_t> UpstreamErrorsByReason(const MetricsSnapshot& s,
                                                       const v1::AgentInstance& a) {
  std::map<std::string, uint64_t> by_reason;
  if (a.metering_source() == v1::METERING_SOURCE_ENGINE_OBSERVED) {
    by_reason = {{"resolve", 0}, {"connect", 0},       {"tls", 0},
                 {"write", 0},   {"response_head", 0}, {"cut", 0}};
  }
  if (auto it = s.proxy.find(a.name()); it != s.proxy.end()) {
    for (const auto& [reason, count] : it->second.upstream_errors) {
      by_reason[reason] = count;
    }
  }
  return by_reason;
}

namespace {

void RenderProxy(const MetricsSnapshot& s, Writer& w) {
  w.Family("ktesio_proxy_request_duration_seconds", "histogram",
           "Time the metering proxy added before a response's first byte reached the agent.");
  for (const v1::AgentInstance& a : s.agents.instances()) {
    if (a.metering_source() != v1::METERING_SOURCE_ENGINE_OBSERVED) {
      continue;
    }
    auto it = s.proxy.find(a.name());
    const LatencyHistogram h =
        it == s.proxy.end() ? LatencyHistogram{} : it->second.added_before_first_byte;
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= std::size(LatencyHistogram::bounds); ++i) {
      cumulative += h.counts[i];
      const std::string le = i < std::size(LatencyHistogram::bounds)
                                 ? FormatDouble(LatencyHistogram::bounds[i])
                                 : "+Inf";
      w.Sample("ktesio_proxy_request_duration_seconds_bucket",
               Labels({{"agent", a.name()}, {"le", le}}), std::to_string(cumulative));
    }
    w.Sample("ktesio_proxy_request_duration_seconds_sum", Labels({{"agent", a.name()}}),
             FormatDouble(h.sum));
    w.Sample("ktesio_proxy_request_duration_seconds_count", Labels({{"agent", a.name()}}),
             std::to_string(h.count));
  }
  w.Family("ktesio_proxy_upstream_errors_total", "counter",
           "Upstream failures of the metering proxy, by reason (since the daemon started).");
  for (const v1::AgentInstance& a : s.agents.instances()) {
    for (const auto& [reason, count] : UpstreamErrorsByReason(s, a)) {
      w.Sample("ktesio_proxy_upstream_errors_total",
               Labels({{"agent", a.name()}, {"reason", reason}}), std::to_string(count));
    }
  }
}

void RenderResources(const MetricsSnapshot& s, Writer& w) {
  w.Family("ktesio_agent_cpu_seconds_total", "counter",
           "CPU time of the agent's whole process tree in its current run.");
  for (const v1::AgentInstance& a : s.agents.instances()) {
    if (a.has_resources()) {
      w.Sample("ktesio_agent_cpu_seconds_total", Labels({{"agent", a.name()}}),
               FormatDouble(a.resources().cpu_seconds()));
    }
  }
  w.Family("ktesio_agent_resident_memory_bytes", "gauge",
           "Resident memory of the agent's whole process tree.");
  for (const v1::AgentInstance& a : s.agents.instances()) {
    if (a.has_resources()) {
      w.Sample("ktesio_agent_resident_memory_bytes", Labels({{"agent", a.name()}}),
               std::to_string(a.resources().resident_memory_bytes()));
    }
  }
  const SelfStats& self = s.self;
  w.Family("process_cpu_seconds_total", "counter",
           "Total user and system CPU time spent in seconds.");
  w.Sample("process_cpu_seconds_total", "", FormatDouble(self.cpu_seconds));
  w.Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  w.Sample("process_resident_memory_bytes", "", std::to_string(self.resident_bytes));
  w.Family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  w.Sample("process_virtual_memory_bytes", "", std::to_string(self.virtual_bytes));
  w.Family("process_open_fds", "gauge", "Number of open file descriptors.");
  w.Sample("process_open_fds", "", std::to_string(self.open_fds));
  w.Family("process_max_fds", "gauge", "Maximum number of open file descriptors.");
  w.Sample("process_max_fds", "", std::to_string(self.max_fds));
  w.Family("process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.");
  w.Sample("process_start_time_seconds", "", FormatDouble(self.start_time_seconds));
}

}  // namespace

v1::ProcessStats ToProcessStats(const TreeStats& tree) {
  v1::ProcessStats stats;
  stats.set_cpu_seconds(tree.cpu_seconds);
  stats.set_resident_memory_bytes(tree.resident_bytes);
  stats.set_processes(tree.processes);
  return stats;
}

void FillResources(const std::vector<TreeRoot>& roots, v1::ListAgentsResponse* agents) {
  for (const TreeRoot& root : roots) {
    if (root.index < 0 || root.index >= agents->instances_size()) {
      continue;
    }
    if (std::optional<TreeStats> tree = SampleTree(root.pid, root.start_time, false);
        tree.has_value()) {
      *agents->mutable_instances(root.index)->mutable_resources() = ToProcessStats(*tree);
    }
  }
}

std::string RenderPrometheus(const MetricsSnapshot& snapshot) {
  Writer w;
  RenderDaemon(snapshot, w);
  RenderAgents(snapshot, w);
  RenderProxy(snapshot, w);
  RenderResources(snapshot, w);
  return w.Take();
}

}  // namespace ktesio::daemon::telemetry
