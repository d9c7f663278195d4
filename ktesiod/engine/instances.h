#pragma once

// The Agent Instances as things to find, list, label and show: registration within the
// operator's limit, lookup, labels (operator edits and the fleet owner's whole-set writes) and
// the read view. Lives on the engine thread.
//
// The read view of an instance is the API's `AgentInstance` message itself, built here and
// nowhere else: every reader (the API, `ktctl`'s JSON, batch results, fleet export) shows that
// one document, and a parallel domain struct would only be a second copy of it to keep in step.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/owner_context.h"
#include "ktesio/contract/labels.h"
#include "ktesio/v1/agent.pb.h"
#include "registry/registry.h"
#include "store/store.h"

namespace ktesio::daemon::engine {

class Instances {
 public:
  struct Hooks {
    // The instance's live metering proxy URL, "" when it has none.
    std::function<std::string(const std::string& name)> proxy_url;
    // Fills view->resources from the row's live process tree (reads /proc); no-op when none.
    std::function<void(const store::InstanceRow& row, v1::AgentInstance* view)> fill_resources;
  };

  Instances(OwnerContext owners, registry::Registry& registry, Hooks hooks)
      : owners_(std::move(owners)), registry_(registry), hooks_(std::move(hooks)) {}

  // Registers a new instance unless `max_instances` already exist. Errors: RESOURCE_EXHAUSTED/
  // LIMIT_REACHED, then as registry::Registry::Register.
  absl::StatusOr<store::InstanceRow> Register(const v1::RegisterAgentRequest& request,
                                              uint64_t max_instances);

  // Errors: NOT_FOUND, INVALID_ARGUMENT/INVALID_NAME, INTERNAL/STORE_ERROR.
  absl::StatusOr<store::InstanceRow> Find(const std::string& name) { return registry_.Find(name); }

  // Every instance (in the store's name order) whose labels `selector` matches; nullptr = all.
  struct Listed {
    store::InstanceRow row;
    store::Store::Labels labels;
  };
  absl::StatusOr<std::vector<Listed>> List(const contract::Selector* selector = nullptr);

  // An operator's label edit: removals first, then sets; the ktesio.io/ prefix is refused.
  // Errors: NOT_FOUND, INVALID_ARGUMENT/INVALID_LABEL, INTERNAL/STORE_ERROR.
  struct LabelEdit {
    std::map<std::string, std::string> set;
    std::vector<std::string> remove;
  };
  struct Labelled {
    store::InstanceRow row;
    store::Store::Labels labels;  // after the edit
    bool changed = false;
  };
  absl::StatusOr<Labelled> Label(const std::string& name, const LabelEdit& edit);

  // Replaces every label of an instance, reserved ones included (the fleet owner's write).
  // Errors: NOT_FOUND, INTERNAL/STORE_ERROR.
  absl::Status SetLabels(const std::string& name, const store::Store::Labels& labels);

  // The read view of `row`: labels (read when not given), proxy URL, usage and budget, restart
  // policy, memory backing; the process-tree figures only with `resources` (they cost /proc
  // reads).
  v1::AgentInstance View(const store::InstanceRow& row,
                         const store::Store::Labels* labels = nullptr,
                         bool resources = false) const;
  // The view of the instance named `name` as it is now. Errors: as Find.
  absl::StatusOr<v1::AgentInstance> View(const std::string& name, bool resources = false);

  // The usage view alone (GetUsage of one instance). Errors: as Find.
  absl::StatusOr<v1::UsageView> Usage(const std::string& name);

  // The views of `listed` with their fleet totals (ListAgents and usage totals).
  void Views(const std::vector<Listed>& listed, bool resources,
             v1::ListAgentsResponse* response) const;

 private:
  OwnerContext owners_;
  registry::Registry& registry_;
  Hooks hooks_;
};

// INVALID_LABEL unless `key` is a valid label key an operator may set (not ktesio.io/...).
absl::Status CheckOperatorLabel(std::string_view key);

}  // namespace ktesio::daemon::engine
