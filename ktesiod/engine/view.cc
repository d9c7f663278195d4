#include "engine/view.h"

#include <array>
#include <utility>

#include "registry/snapshot.h"

namespace ktesio::daemon::engine {
namespace {

constexpr std::array<std::pair<v1::AgentState, const char*>, 7> kStates = {{
    {v1::AGENT_STATE_REGISTERED, "registered"},
    {v1::AGENT_STATE_STARTING, "starting"},
    {v1::AGENT_STATE_RUNNING, "running"},
    {v1::AGENT_STATE_PAUSED, "paused"},
    {v1::AGENT_STATE_STOPPING, "stopping"},
    {v1::AGENT_STATE_STOPPED, "stopped"},
    {v1::AGENT_STATE_FAILED, "failed"},
}};

}  // namespace

v1::AgentState StateFromWire(const std::string& state) {
  for (const auto& [value, wire] : kStates) {
    if (state == wire) {
      return value;
    }
  }
  return v1::AGENT_STATE_UNSPECIFIED;
}

std::string StateToWire(v1::AgentState state) {
  for (const auto& [value, wire] : kStates) {
    if (state == value) {
      return wire;
    }
  }
  return "unspecified";
}

v1::AgentInstance BuildInstanceView(const store::InstanceRow& row) {
  v1::AgentInstance view;
  view.set_name(row.name);
  view.set_kind(row.kind);
  view.set_state(StateFromWire(row.state));
  view.set_cause(row.cause);
  if (row.state == "failed") {
    view.set_failed_cause(row.cause);
  }
  view.set_restart_count(static_cast<uint32_t>(row.restart_count));
  view.set_restart_policy(v1::RESTART_POLICY_ON_FAILURE);
  view.set_agent_home(row.home);
  view.set_registered_at_unix_ms(row.registered_at_ms);
  view.set_state_since_unix_ms(row.state_since_ms);
  view.set_current_run(static_cast<uint64_t>(row.current_run));
  if (row.pid.has_value()) {
    view.set_pid(*row.pid);
  }
  if (row.started_at_ms.has_value()) {
    view.set_started_at_unix_ms(*row.started_at_ms);
  }
  v1::AdapterSnapshot snapshot;
  if (snapshot.ParseFromString(row.snapshot)) {
    view.set_metering_source(snapshot.metering_source());
    *view.mutable_capabilities() = snapshot.capabilities();
    *view.mutable_projected() = registry::Project(snapshot);
    *view.mutable_adapter() = std::move(snapshot);
  }
  view.mutable_usage();  // always present, zeros until metering fills it
  return view;
}

v1::FleetTotals BuildFleetTotals(
    const google::protobuf::RepeatedPtrField<v1::AgentInstance>& instances) {
  v1::FleetTotals totals;
  for (const v1::AgentInstance& instance : instances) {
    totals.set_total_input_tokens(totals.total_input_tokens() +
                                  instance.usage().cumulative_input_tokens());
    totals.set_total_output_tokens(totals.total_output_tokens() +
                                   instance.usage().cumulative_output_tokens());
  }
  return totals;
}

}  // namespace ktesio::daemon::engine
