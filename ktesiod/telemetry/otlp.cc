#include "telemetry/otlp.h"

#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/json_writer.h"

namespace ktesio::daemon::telemetry {
namespace {

using contract::JsonWriter;
using Attributes = std::vector<std::pair<std::string, std::string>>;

void WriteAttributes(JsonWriter& json, const Attributes& attributes) {
  json.Key("attributes").BeginArray();
  for (const auto& [key, value] : attributes) {
    json.BeginObject().Key("key").String(key);
    json.Key("value").BeginObject().Key("stringValue").String(value).EndObject();
    json.EndObject();
  }
  json.EndArray();
}

// One metric of the request: writes its envelope and lets `points` write the data points.
class Metrics {
 public:
  Metrics(JsonWriter& json, std::string start, std::string now)
      : json_(json), start_(std::move(start)), now_(std::move(now)) {}

  struct IntPoint {
    Attributes attributes;
    uint64_t value = 0;
  };
  struct DoublePoint {
    Attributes attributes;
    double value = 0;
    std::string start = {};  // a cumulative point's own start (Unix ns) when not the daemon's
  };

  void Sum(const char* name, const char* unit, const char* description,
           const std::vector<IntPoint>& points) {
    Begin(name, unit, description, "sum");
    for (const IntPoint& p : points) {
      Point(p.attributes, true);
      json_.Key("asInt").String(std::to_string(p.value)).EndObject();
    }
    EndSum();
  }
  void DoubleSum(const char* name, const char* unit, const char* description,
                 const std::vector<DoublePoint>& points) {
    Begin(name, unit, description, "sum");
    for (const DoublePoint& p : points) {
      Point(p.attributes, true, p.start);
      json_.Key("asDouble").Raw(FormatDouble(p.value)).EndObject();
    }
    EndSum();
  }
  void Gauge(const char* name, const char* unit, const char* description,
             const std::vector<DoublePoint>& points) {
    Begin(name, unit, description, "gauge");
    for (const DoublePoint& p : points) {
      Point(p.attributes, false);
      json_.Key("asDouble").Raw(FormatDouble(p.value)).EndObject();
    }
    json_.EndArray().EndObject().EndObject();
  }
  template <typename Histogram>
  void Histograms(const char* name, const char* unit, const char* description,
                  const std::vector<std::pair<Attributes, Histogram>>& points) {
    Begin(name, unit, description, "histogram");
    for (const auto& [attributes, h] : points) {
      Point(attributes, true);
      json_.Key("count").String(std::to_string(h.count));
      json_.Key("sum").Raw(FormatDouble(h.sum));
      json_.Key("bucketCounts").BeginArray();
      for (uint64_t c : h.counts) {
        json_.String(std::to_string(c));
      }
      json_.EndArray().Key("explicitBounds").BeginArray();
      for (double bound : Histogram::bounds) {
        json_.Raw(FormatDouble(bound));
      }
      json_.EndArray().EndObject();
    }
    json_.EndArray().Key("aggregationTemporality").Int(2).EndObject().EndObject();
  }

 private:
  void Begin(const char* name, const char* unit, const char* description, const char* kind) {
    json_.BeginObject().Key("name").String(name).Key("unit").String(unit);
    json_.Key("description").String(description);
    json_.Key(kind).BeginObject().Key("dataPoints").BeginArray();
  }
  void Point(const Attributes& attributes, bool cumulative, const std::string& start = {}) {
    json_.BeginObject();
    WriteAttributes(json_, attributes);
    if (cumulative) {
      json_.Key("startTimeUnixNano").String(start.empty() ? start_ : start);
    }
    json_.Key("timeUnixNano").String(now_);
  }
  void EndSum() {
    json_.EndArray().Key("aggregationTemporality").Int(2).Key("isMonotonic").Bool(true);
    json_.EndObject().EndObject();
  }

  JsonWriter& json_;
  std::string start_;
  std::string now_;
};

// The agent's budget limits and what is left of each, one point per limit it has.
void BudgetPoints(const v1::AgentInstance& a, std::vector<Metrics::DoublePoint>& limits,
                  std::vector<Metrics::DoublePoint>& remaining) {
  if (!a.has_budget()) {
    return;
  }
  const v1::BudgetView& b = a.budget();
  auto add = [&](const char* scope, const char* dimension, bool has, double limit, double left) {
    if (has) {
      Attributes attributes = {
          {"ktesio.agent", a.name()}, {"scope", scope}, {"dimension", dimension}};
      limits.push_back({attributes, limit});
      remaining.push_back({attributes, left});
    }
  };
  add("run", "tokens", b.has_per_run_limit(), static_cast<double>(b.per_run_limit()),
      static_cast<double>(b.per_run_remaining()));
  add("cumulative", "tokens", b.has_cumulative_limit(), static_cast<double>(b.cumulative_limit()),
      static_cast<double>(b.cumulative_remaining()));
  add("run", "dollars", b.has_per_run_cost_cap(), static_cast<double>(b.per_run_cost_cap()) / 1e6,
      static_cast<double>(b.per_run_dollars_remaining()) / 1e6);
  add("cumulative", "dollars", b.has_cumulative_cost_cap(),
      static_cast<double>(b.cumulative_cost_cap()) / 1e6,
      static_cast<double>(b.cumulative_dollars_remaining()) / 1e6);
}

void AgentMetrics(const MetricsSnapshot& s, Metrics& m) {
  const auto& agents = s.agents.instances();
  std::vector<Metrics::DoublePoint> states;
  std::map<v1::AgentState, uint64_t> by_state;
  for (const v1::AgentInstance& a : agents) {
    by_state[a.state()] += 1;
  }
  for (const auto& [state, name] : kAgentStates) {
    states.push_back({{{"state", name}}, static_cast<double>(by_state[state])});
  }
  m.Gauge("ktesio.agents", "{instance}", "Agent instances per lifecycle state.", states);
  std::vector<Metrics::DoublePoint> state_of;
  std::vector<Metrics::IntPoint> restarts, tokens, calls, breaches;
  std::vector<Metrics::DoublePoint> spend, cpu, memory, limits, remaining;
  for (const v1::AgentInstance& a : agents) {
    const std::string& agent = a.name();
    for (const auto& [state, name] : kAgentStates) {
      state_of.push_back(
          {{{"ktesio.agent", agent}, {"state", name}}, a.state() == state ? 1.0 : 0});
    }
    restarts.push_back({{{"ktesio.agent", agent}}, a.restarts_total()});
    tokens.push_back(
        {{{"ktesio.agent", agent}, {"direction", "input"}}, a.usage().cumulative_input_tokens()});
    tokens.push_back(
        {{{"ktesio.agent", agent}, {"direction", "output"}}, a.usage().cumulative_output_tokens()});
    auto counters = s.counters.find(agent);
    if (a.metering_source() == v1::METERING_SOURCE_ENGINE_OBSERVED) {
      const AgentCounters c = counters == s.counters.end() ? AgentCounters{} : counters->second;
      calls.push_back({{{"ktesio.agent", agent}, {"usage", "known"}}, c.known_calls});
      calls.push_back({{{"ktesio.agent", agent}, {"usage", "unknown"}}, c.unknown_calls});
    }
    for (const auto& [action, count] : BreachesByAction(s, a)) {  // zeros as on /metrics
      breaches.push_back({{{"ktesio.agent", agent}, {"action", action}}, count});
    }
    if (a.usage().has_cumulative_dollars()) {
      spend.push_back(
          {{{"ktesio.agent", agent}}, static_cast<double>(a.usage().cumulative_dollars()) / 1e6});
    }
    if (a.has_resources()) {
      // The tree's CPU time starts from 0 with each run: so does its cumulative series.
      cpu.push_back({{{"ktesio.agent", agent}},
                     a.resources().cpu_seconds(),
                     a.has_started_at_unix_ms() ? std::to_string(a.started_at_unix_ms() * 1000000)
                                                : std::string()});
      memory.push_back(
          {{{"ktesio.agent", agent}}, static_cast<double>(a.resources().resident_memory_bytes())});
    }
    BudgetPoints(a, limits, remaining);
  }
  m.Gauge("ktesio.agent.state", "1", "1 for the state the agent is in, 0 for the others.",
          state_of);
  m.Sum("ktesio.agent.restarts", "{restart}",
        "Automatic restarts over the agent's life (an operator start does not reset it).",
        restarts);
  m.Sum("ktesio.agent.tokens", "{token}", "Tokens in the usage ledger, over every run.", tokens);
  m.Sum("ktesio.agent.model_calls", "{call}",
        "Model calls seen by the metering proxy, by whether the provider reported usage.", calls);
  m.DoubleSum("ktesio.agent.spend", "USD", "Estimated spend over every run, at the Rate.", spend);
  m.Sum("ktesio.agent.budget.breaches", "{breach}", "Budget breaches over every run.", breaches);
  m.Gauge("ktesio.agent.budget.limit", "1", "A budget limit in tokens or dollars.", limits);
  m.Gauge("ktesio.agent.budget.remaining", "1", "What is left of a budget limit.", remaining);
  m.DoubleSum("ktesio.agent.cpu.time", "s", "CPU time of the agent's process tree in its run.",
              cpu);
  m.Gauge("ktesio.agent.memory.resident", "By", "Resident memory of the agent's process tree.",
          memory);
}

void ProxyAndDaemonMetrics(const MetricsSnapshot& s, Metrics& m) {
  std::vector<std::pair<Attributes, LatencyHistogram>> durations;
  std::vector<Metrics::IntPoint> errors;
  for (const auto& [agent, figures] : s.proxy) {
    durations.emplace_back(Attributes{{"ktesio.agent", agent}}, figures.added_before_first_byte);
  }
  for (const v1::AgentInstance& a : s.agents.instances()) {
    for (const auto& [reason, count] : UpstreamErrorsByReason(s, a)) {  // zeros as on /metrics
      errors.push_back({{{"ktesio.agent", a.name()}, {"reason", reason}}, count});
    }
  }
  m.Histograms("ktesio.proxy.request.duration", "s",
               "Time the metering proxy added before a response's first byte.", durations);
  m.Sum("ktesio.proxy.upstream_errors", "{error}", "Upstream failures of the metering proxy.",
        errors);
  std::vector<std::pair<Attributes, TokenHistogram>> genai;
  for (const GenAiTokenUsage& u : s.genai) {
    Attributes attributes = {{"gen_ai.operation.name", u.operation},
                             {"gen_ai.provider.name", u.provider}};
    if (!u.model.empty()) {
      attributes.emplace_back("gen_ai.request.model", u.model);
    }
    attributes.emplace_back("gen_ai.token.type", u.token_type);
    attributes.emplace_back("ktesio.agent", u.agent);
    genai.emplace_back(std::move(attributes), u.tokens);
  }
  m.Histograms("gen_ai.client.token.usage", "{token}",
               "Number of input and output tokens used, per model call.", genai);
  std::vector<Metrics::IntPoint> events;
  for (const auto& [type, count] : s.events_by_type) {
    events.push_back({{{"type", type}}, count});
  }
  m.Sum("ktesio.events", "{event}", "Persisted events, by type.", events);
  std::vector<Metrics::IntPoint> requests;
  for (const ApiRequestCount& r : s.api_requests) {
    requests.push_back({{{"rpc.method", r.rpc}, {"rpc.grpc.status_code", r.code}}, r.count});
  }
  m.Sum("ktesio.api.requests", "{request}", "Finished API calls, by RPC and status code.",
        requests);
  m.DoubleSum("process.cpu.time", "s", "CPU time of the daemon process.",
              {{{}, s.self.cpu_seconds}});
  m.Gauge("process.memory.usage", "By", "Resident memory of the daemon process.",
          {{{}, static_cast<double>(s.self.resident_bytes)}});
  m.Gauge("process.open_file_descriptor.count", "{file_descriptor}",
          "Open file descriptors of the daemon process.",
          {{{}, static_cast<double>(s.self.open_fds)}});
}

}  // namespace

std::string RenderOtlpJson(const MetricsSnapshot& s, const OtlpConfig& config,
                           int64_t now_unix_ns) {
  JsonWriter json;
  json.BeginObject().Key("resourceMetrics").BeginArray().BeginObject();
  json.Key("resource").BeginObject();
  Attributes resource = {{"service.name", config.service_name},
                         {"service.version", s.daemon_version},
                         {"ktesio.api_version", s.api_version},
                         {"ktesio.contract_version", s.contract_version}};
  for (const auto& [key, value] : config.resource_attributes) {
    if (key != "service.name") {
      resource.emplace_back(key, value);
    }
  }
  WriteAttributes(json, resource);
  json.EndObject();
  json.Key("scopeMetrics").BeginArray().BeginObject();
  json.Key("scope").BeginObject().Key("name").String("ktesiod");
  json.Key("version").String(s.daemon_version).EndObject();
  json.Key("schemaUrl")
      .String(absl::StrCat("https://opentelemetry.io/schemas/", kGenAiSemconvVersion));
  json.Key("metrics").BeginArray();
  Metrics metrics(json, std::to_string(static_cast<int64_t>(s.daemon_start_time_seconds * 1e9)),
                  std::to_string(now_unix_ns));
  AgentMetrics(s, metrics);
  ProxyAndDaemonMetrics(s, metrics);
  json.EndArray().EndObject().EndArray();
  json.EndObject().EndArray().EndObject();
  return json.Take();
}

}  // namespace ktesio::daemon::telemetry
