// The engine's side of telemetry: one consistent read of what the metrics endpoint shows, and
// the process-tree figures of the read views.

#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/view.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/v1/version.h"

namespace ktesio::daemon::engine {
namespace {

// An instance whose processes may exist: their tree is worth sampling.
std::optional<telemetry::TreeRoot> RootOf(const store::InstanceRow& row, int index) {
  if (!supervisor::IsLive(supervisor::RowState(row)) || !row.shim_pid.has_value() ||
      *row.shim_pid <= 0) {
    return std::nullopt;
  }
  return telemetry::TreeRoot{index, static_cast<int>(*row.shim_pid),
                             static_cast<uint64_t>(row.shim_start_time.value_or(0))};
}

}  // namespace

void Engine::FillResourcesOf(const store::InstanceRow& row, v1::AgentInstance* view) const {
  if (std::optional<telemetry::TreeRoot> root = RootOf(row, 0); root.has_value()) {
    if (std::optional<telemetry::TreeStats> tree =
            telemetry::SampleTree(root->pid, root->start_time, false);
        tree.has_value()) {
      *view->mutable_resources() = telemetry::ToProcessStats(*tree);
    }
  }
}

void Engine::ObserveGenAi(const std::string& name,
                          const std::vector<metering::CallRecord>& records) {
  for (const metering::CallRecord& record : records) {
    if (!record.known) {
      continue;  // no usage reported: nothing to observe (counted as unknown usage instead)
    }
    // Semantic conventions 1.37: the provider by the API the call spoke; every recognized API
    // is a chat-style generation.
    const std::string provider =
        record.shape == metering::ApiShape::kAnthropicMessages ? "anthropic" : "openai";
    std::string model = record.model;
    if (!model.empty() && !genai_.contains({name, provider, "chat", "input", model})) {
      // This instance's distinct models so far, whichever provider each came through.
      std::set<std::string_view> models;
      bool seen = false;
      for (const auto& [key, unused] : genai_) {
        if (std::get<0>(key) == name && std::get<3>(key) == "input" && !std::get<4>(key).empty()) {
          models.insert(std::get<4>(key));
          seen = seen || std::get<4>(key) == model;
        }
      }
      if (!seen && models.size() >= kMaxGenAiModels) {
        model = kOtherGenAiModel;
      }
    }
    genai_[{name, provider, "chat", "input", model}].Observe(
        static_cast<double>(record.usage.input));
    genai_[{name, provider, "chat", "output", model}].Observe(
        static_cast<double>(record.usage.output));
  }
}

absl::Status Engine::CollectMetrics(telemetry::MetricsSnapshot* snapshot,
                                    std::vector<telemetry::TreeRoot>* roots) {
  snapshot->daemon_version = std::string(v1::kKtesioVersion);
  snapshot->api_version = std::string(v1::kApiVersion);
  snapshot->contract_version = std::string(contract::kContractVersion);
  snapshot->daemon_start_time_seconds = static_cast<double>(started_at_ms_) / 1000.0;
  KT_ASSIGN_OR_RETURN(std::vector<store::InstanceRow> rows, store_->ListInstances());
  for (const store::InstanceRow& row : rows) {
    const int index = snapshot->agents.instances_size();
    v1::AgentInstance* view = snapshot->agents.add_instances();
    *view = instances_.View(row);
    if (std::optional<telemetry::TreeRoot> root = RootOf(row, index); root.has_value()) {
      roots->push_back(*root);
    }
    if (view->metering_source() == v1::METERING_SOURCE_ENGINE_OBSERVED) {
      KT_ASSIGN_OR_RETURN(store::Store::UsageTotals totals, store_->Usage(row.id, row.current_run));
      telemetry::AgentCounters& counters = snapshot->counters[row.name];
      counters.known_calls = totals.priced_events + totals.unpriced_events;
      counters.unknown_calls = totals.unknown_calls;
    }
  }
  *snapshot->agents.mutable_totals() = BuildFleetTotals(snapshot->agents.instances());
  for (auto& [name, stats] : proxy_->Stats()) {
    if (snapshot->counters.contains(name)) {  // an engine-observed instance that still exists
      telemetry::ProxyFigures& figures = snapshot->proxy[name];
      figures.added_before_first_byte = stats.added_before_first_byte;
      figures.upstream_errors = std::move(stats.upstream_errors);
    }
  }
  KT_ASSIGN_OR_RETURN(std::vector<store::Store::BreachCount> breaches, store_->CountBreaches());
  for (const store::Store::BreachCount& breach : breaches) {
    snapshot->counters[breach.instance].breaches_by_action[breach.action] = breach.count;
  }
  KT_RETURN_IF_ERROR(AdvanceEventCounts());
  snapshot->events_by_type = event_counts_;
  for (const auto& [key, histogram] : genai_) {
    const auto& [agent, provider, operation, token_type, model] = key;
    snapshot->genai.push_back({agent, provider, operation, token_type, model, histogram});
  }
  return absl::OkStatus();
}

absl::Status Engine::AdvanceEventCounts() {
  // The first count starts from the store's own: the log's rows plus what retention pruned.
  KT_ASSIGN_OR_RETURN(store::Store::EventCounts events,
                      store_->CountEvents(event_counts_cursor_, !event_counts_loaded_));
  for (const auto& [type, count] : events.by_type) {
    event_counts_[type] += count;
  }
  event_counts_cursor_ = events.last_cursor;
  event_counts_loaded_ = true;
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::engine
