#include "engine/view.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "registry/snapshot.h"
#include "supervisor/supervisor.h"

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
  if (supervisor::RowState(row) == supervisor::State::kFailed) {
    view.set_failed_cause(row.cause);
  }
  view.set_restart_count(static_cast<uint32_t>(row.restart_count));
  view.set_restarts_total(static_cast<uint64_t>(row.restarts_total));
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
  int64_t dollars = 0;
  bool any_priced = false;
  uint64_t unpriced = 0;
  // Token sums saturate at 2^63 - 1 as each instance's own do (JSON readers keep int64).
  static constexpr uint64_t kMaxSum = INT64_MAX;
  const auto add = [](uint64_t sum, uint64_t more) {
    more = std::min(more, kMaxSum);
    return sum > kMaxSum - more ? kMaxSum : sum + more;
  };
  for (const v1::AgentInstance& instance : instances) {
    const v1::UsageView& usage = instance.usage();
    totals.set_total_input_tokens(
        add(totals.total_input_tokens(), usage.cumulative_input_tokens()));
    totals.set_total_output_tokens(
        add(totals.total_output_tokens(), usage.cumulative_output_tokens()));
    if (usage.has_cumulative_dollars()) {
      any_priced = true;
      dollars = dollars > INT64_MAX - usage.cumulative_dollars()
                    ? INT64_MAX
                    : dollars + usage.cumulative_dollars();
    } else if (usage.cumulative_input_tokens() + usage.cumulative_output_tokens() > 0) {
      ++unpriced;  // used tokens, but no Rate: its spend is unknown, never $0.00
    }
  }
  if (any_priced) {
    totals.set_total_dollars(dollars);
    totals.set_estimate_label("estimated");
  }
  totals.set_dollars_partial(any_priced && unpriced > 0);
  totals.set_unpriced_count(unpriced);
  return totals;
}

}  // namespace ktesio::daemon::engine
