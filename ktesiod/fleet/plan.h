#pragma once

// Fleet plans (FleetService.Apply): what it takes to bring the host's instances to what fleet
// specs declare. Pure: the caller reads the current instances and previews the declared
// adapters; this file decides, with no I/O, so every rule is unit-tested.
//
// Rules (docs/fleet-file.md "How apply decides"):
//   - a declared instance that does not exist: create (+ start when state = "running");
//   - labels: the declared set plus ktesio.io/fleet = <fleet name> replaces the instance's;
//   - config: every declared key whose stored value differs is set; undeclared keys are left;
//   - state: "running" starts a registered/stopped/failed instance, "stopped" stops a
//     starting/running/paused one, unset leaves the state alone (a paused instance counts as
//     running: apply never undoes an operator's or a budget's pause);
//   - an adapter whose snapshot differs from the registered one: recreate (refused without
//     --recreate);
//   - --prune: an instance labelled with one of the applied fleets' names that no spec declares
//     is removed (its home retained); instances without the label are never pruned.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ktesio/v1/fleet.pb.h"

namespace ktesio::daemon::fleet {

using Labels = std::map<std::string, std::string>;

// One registered instance as the planner sees it.
struct Current {
  std::string name;
  v1::AgentState state = v1::AGENT_STATE_UNSPECIFIED;
  v1::AdapterSnapshot adapter;
  Labels labels;
  std::map<std::string, std::string> config;  // the instance layer, as stored
};

// One declared instance after validation.
struct Desired {
  const v1::FleetInstanceSpec* spec = nullptr;
  std::string fleet;                          // the owning FleetSpec's name
  v1::AdapterSnapshot adapter;                // what registering it would store
  std::map<std::string, std::string> config;  // normalized as the store keeps values
  std::map<std::string, v1::SourceLocation> config_locations;
};

struct Step {
  std::string name;
  std::vector<v1::PlanAction> actions;  // empty: unchanged
  std::vector<std::string> changes;
  const Desired* desired = nullptr;  // null for prune
  Labels labels;                     // the labels to write (create/update/recreate)
  std::map<std::string, std::string> config_to_set;
  bool restore_running = false;  // recreate: start again afterwards
  v1::SourceLocation location;

  bool Has(v1::PlanAction action) const;
};

// Steps ordered by name. `fleets`: the names of the applied FleetSpecs (the prune scope).
std::vector<Step> ComputePlan(const std::vector<Desired>& desired,
                              const std::vector<Current>& current,
                              const std::vector<std::string>& fleets, bool prune);

// The config value shown in a change line: secret references as they are, values of agent.*
// keys (which may be credentials) masked.
std::string DisplayValue(const std::string& key, const std::string& value);

}  // namespace ktesio::daemon::fleet
