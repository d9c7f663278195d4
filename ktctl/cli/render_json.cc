// The frozen JSON documents of ktctl's reading commands (docs/json.md). Key sets only grow.

#include "absl/strings/str_cat.h"
#include "cli/output.h"
#include "cli/render.h"
#include "ktesio/contract/json_writer.h"

namespace ktesio::cli {

void WriteUsageView(contract::JsonWriter& json, const v1::UsageView& usage) {
  json.BeginObject();
  json.Key("cumulative_input_tokens").Uint(usage.cumulative_input_tokens());
  json.Key("cumulative_output_tokens").Uint(usage.cumulative_output_tokens());
  json.Key("current_run_input_tokens").Uint(usage.current_run_input_tokens());
  json.Key("current_run_output_tokens").Uint(usage.current_run_output_tokens());
  if (usage.has_cumulative_dollars()) {
    json.Key("cumulative_dollars").Int(usage.cumulative_dollars());
  }
  if (usage.has_current_run_dollars()) {
    json.Key("current_run_dollars").Int(usage.current_run_dollars());
  }
  if (!usage.estimate_label().empty()) {
    json.Key("estimate_label").String(usage.estimate_label());
  }
  json.Key("unknown_usage_calls").Uint(usage.unknown_usage_calls());
  json.EndObject();
}

void WriteBudgetView(contract::JsonWriter& json, const v1::BudgetView& b) {
  json.BeginObject();
  if (b.has_per_run_limit()) {
    json.Key("per_run_limit").Uint(b.per_run_limit());
  }
  if (b.has_per_run_remaining()) {
    json.Key("per_run_remaining").Uint(b.per_run_remaining());
  }
  if (b.has_cumulative_limit()) {
    json.Key("cumulative_limit").Uint(b.cumulative_limit());
  }
  if (b.has_cumulative_remaining()) {
    json.Key("cumulative_remaining").Uint(b.cumulative_remaining());
  }
  if (b.has_per_run_cost_cap()) {
    json.Key("per_run_cost_cap").Int(b.per_run_cost_cap());
  }
  if (b.has_per_run_dollars_remaining()) {
    json.Key("per_run_dollars_remaining").Int(b.per_run_dollars_remaining());
  }
  if (b.has_cumulative_cost_cap()) {
    json.Key("cumulative_cost_cap").Int(b.cumulative_cost_cap());
  }
  if (b.has_cumulative_dollars_remaining()) {
    json.Key("cumulative_dollars_remaining").Int(b.cumulative_dollars_remaining());
  }
  if (!b.estimate_label().empty()) {
    json.Key("estimate_label").String(b.estimate_label());
  }
  json.Key("breach_action").String(BreachActionName(b.breach_action()));
  json.EndObject();
}

void WriteFleetTotals(contract::JsonWriter& json, const v1::FleetTotals& totals) {
  json.BeginObject();
  json.Key("total_input_tokens").Uint(totals.total_input_tokens());
  json.Key("total_output_tokens").Uint(totals.total_output_tokens());
  if (totals.has_total_dollars()) {
    json.Key("total_dollars").Int(totals.total_dollars());
  }
  json.Key("dollars_partial").Bool(totals.dollars_partial());
  json.Key("unpriced_count").Uint(totals.unpriced_count());
  if (!totals.estimate_label().empty()) {
    json.Key("estimate_label").String(totals.estimate_label());
  }
  json.EndObject();
}

void WriteFleetEntry(contract::JsonWriter& json, const v1::AgentInstance& instance) {
  json.BeginObject();
  json.Key("name").String(instance.name());
  json.Key("kind").String(instance.kind());
  json.Key("state").String(StateName(instance.state()));
  json.Key("restart_count").Uint(instance.restart_count());
  json.Key("restart_policy").String(RestartPolicyName(instance.restart_policy()));
  if (!instance.failed_cause().empty()) {
    json.Key("failed_cause").String(instance.failed_cause());
  }
  json.Key("budget");
  if (instance.has_budget()) {
    WriteBudgetView(json, instance.budget());
  } else {
    json.Null();
  }
  json.Key("usage");
  WriteUsageView(json, instance.usage());
  json.Key("metering_source").String(MeteringSourceName(instance.metering_source()));
  json.Key("agent_home").String(instance.agent_home());
  if (instance.has_pid()) {
    json.Key("pid").Int(instance.pid());
  }
  if (instance.has_started_at_unix_ms()) {
    json.Key("started_at").String(FormatTime(instance.started_at_unix_ms()));
  }
  if (!instance.proxy_url().empty()) {
    json.Key("proxy_url").String(instance.proxy_url());
  }
  if (instance.has_resources()) {
    const v1::ProcessStats& r = instance.resources();
    json.Key("resources").BeginObject();
    json.Key("cpu_ms").Int(std::llround(r.cpu_seconds() * 1000.0));
    json.Key("resident_memory_bytes").Uint(r.resident_memory_bytes());
    json.Key("processes").Uint(r.processes());
    json.EndObject();
  }
  if (instance.has_memory() && instance.memory().kind() != v1::MEMORY_KIND_UNSPECIFIED) {
    const v1::MemoryBacking& m = instance.memory();
    json.Key("memory").BeginObject();
    json.Key("kind").String(m.kind() == v1::MEMORY_KIND_FILESYSTEM ? "filesystem" : "native");
    json.Key("guarantee")
        .String(m.guarantee() == v1::MEMORY_GUARANTEE_MANAGED_DIR_BYTE_DURABLE
                    ? "managed_dir_byte_durable"
                    : "home_persistence_only");
    if (!m.dir().empty()) {
      json.Key("dir").String(m.dir());
    }
    json.Key("declared").Bool(m.declared());
    json.EndObject();
  }
  json.EndObject();
}

void WriteLabels(contract::JsonWriter& json, const v1::AgentInstance& instance) {
  const std::map<std::string, std::string> sorted(instance.labels().begin(),
                                                  instance.labels().end());
  json.BeginObject();
  for (const auto& [key, value] : sorted) {
    json.Key(key).String(value);
  }
  json.EndObject();
}

std::string LabelsText(const v1::AgentInstance& instance) {
  const std::map<std::string, std::string> sorted(instance.labels().begin(),
                                                  instance.labels().end());
  std::string out;
  for (const auto& [key, value] : sorted) {
    absl::StrAppend(&out, out.empty() ? "" : ",", key, "=", value);
  }
  return out.empty() ? std::string("<none>") : out;
}

std::string ListDocument(const v1::ListAgentsResponse& response, const ListOptions& options) {
  contract::JsonWriter json;
  json.BeginObject().Key("schema_version").Int(2).Key("totals");
  WriteFleetTotals(json, response.totals());
  json.Key("instances").BeginArray();
  const bool labels = options.show_labels || !options.label_columns.empty();
  for (const v1::AgentInstance& instance : response.instances()) {
    if (!labels) {
      WriteFleetEntry(json, instance);
      continue;
    }
    // The frozen entry, with "labels" added before it closes.
    contract::JsonWriter entry;
    WriteFleetEntry(entry, instance);
    std::string text = entry.Take();
    text.pop_back();  // the entry's closing brace
    contract::JsonWriter tail;
    WriteLabels(tail, instance);
    json.Raw(absl::StrCat(text, ",\"labels\":", tail.Take(), "}"));
  }
  json.EndArray().EndObject();
  return json.Take() + "\n";
}

std::string ShowDocument(const v1::AgentInstance& instance) {
  contract::JsonWriter json;
  json.BeginObject().Key("schema_version").Int(2).Key("instance");
  WriteFleetEntry(json, instance);
  json.EndObject();
  return json.Take() + "\n";
}

std::string StopAllDocument(const v1::StopAllAgentsResponse& response) {
  contract::JsonWriter json;
  json.BeginObject().Key("schema_version").Int(2).Key("instances").BeginArray();
  for (const v1::AgentInstance& instance : response.instances()) {
    WriteFleetEntry(json, instance);
  }
  json.EndArray().Key("notices").BeginArray();
  for (const std::string& notice : response.notices()) {
    json.String(notice);
  }
  json.EndArray().EndObject();
  return json.Take() + "\n";
}

std::string StatusDocument(const v1::GetStatusResponse& status) {
  contract::JsonWriter json;
  json.BeginObject().Key("schema_version").Int(1);
  json.Key("daemon_version").String(status.version().daemon_version());
  json.Key("api_version").String(status.version().api_version());
  json.Key("contract_version").String(status.version().contract_version());
  json.Key("pid").Uint(status.pid());
  json.Key("started_at").String(FormatTime(status.started_at_unix_ms()));
  json.Key("uptime_ms").Int(status.uptime_ms());
  json.Key("state_dir").String(status.state_dir());
  json.Key("socket").String(status.socket_path());
  json.Key("mode").String(status.system_mode() ? "system" : "user");
  json.Key("os").String(status.os());
  json.Key("instances").BeginObject().Key("total").Uint(status.instances_total());
  json.Key("by_state").BeginObject();
  std::map<std::string, uint32_t> by_state(status.instances_by_state().begin(),
                                           status.instances_by_state().end());
  for (const auto& [state, count] : by_state) {
    json.Key(state).Uint(count);
  }
  json.EndObject().EndObject();
  if (!status.metrics_address().empty()) {
    json.Key("metrics_address").String(status.metrics_address());
  }
  json.Key("degraded").Bool(status.problems_size() > 0);
  json.Key("problems").BeginArray();
  for (const std::string& problem : status.problems()) {
    json.String(problem);
  }
  json.EndArray().EndObject();
  return json.Take() + "\n";
}

}  // namespace ktesio::cli
