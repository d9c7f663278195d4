#include "fleet/plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "fleet/apply.h"
#include "google/protobuf/util/message_differencer.h"
#include "ktesio/contract/labels.h"
#include "ktesio/contract/toml_text.h"

namespace ktesio::daemon::fleet {
namespace {

bool IsAtRest(v1::AgentState state) {
  return state == v1::AGENT_STATE_REGISTERED || state == v1::AGENT_STATE_STOPPED ||
         state == v1::AGENT_STATE_FAILED;
}

bool IsLive(v1::AgentState state) {
  return state == v1::AGENT_STATE_STARTING || state == v1::AGENT_STATE_RUNNING ||
         state == v1::AGENT_STATE_PAUSED;
}

// Snapshots compared without where the manifest was read from.
bool SameAdapter(v1::AdapterSnapshot a, v1::AdapterSnapshot b) {
  a.clear_manifest_path();
  b.clear_manifest_path();
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

Labels DesiredLabels(const Desired& desired) {
  Labels labels(desired.spec->labels().begin(), desired.spec->labels().end());
  labels[std::string(contract::kFleetLabel)] = desired.fleet;
  return labels;
}

void DiffLabels(const Labels& from, const Labels& to, std::vector<std::string>* changes) {
  for (const auto& [key, value] : to) {
    const auto old = from.find(key);
    if (old == from.end()) {
      changes->push_back(absl::StrCat("label ", key, "=", value, " added"));
    } else if (old->second != value) {
      changes->push_back(absl::StrCat("label ", key, ": ", old->second, " -> ", value));
    }
  }
  for (const auto& [key, value] : from) {
    if (to.count(key) == 0) {
      changes->push_back(absl::StrCat("label ", key, "=", value, " removed"));
    }
  }
}

void PlanState(const Desired& desired, v1::AgentState state, Step* step) {
  if (desired.spec->state() == v1::DESIRED_STATE_RUNNING && IsAtRest(state)) {
    step->actions.push_back(v1::PLAN_ACTION_START);
  } else if (desired.spec->state() == v1::DESIRED_STATE_STOPPED && IsLive(state)) {
    step->actions.push_back(v1::PLAN_ACTION_STOP);
  }
}

Step PlanExisting(const Desired& desired, const Current& current) {
  Step step;
  step.name = current.name;
  step.desired = &desired;
  step.location = desired.spec->location();
  step.labels = DesiredLabels(desired);
  const auto owner = current.labels.find(std::string(contract::kFleetLabel));
  if (owner == current.labels.end()) {
    step.changes.push_back(absl::StrCat("adopted into fleet ", desired.fleet));
  } else if (owner->second != desired.fleet) {
    step.changes.push_back(
        absl::StrCat("moved from fleet ", owner->second, " to fleet ", desired.fleet));
  }
  Labels compared = current.labels;
  DiffLabels(compared, step.labels, &step.changes);
  for (const auto& [key, value] : desired.config) {
    const auto old = current.config.find(key);
    if (old == current.config.end()) {
      step.changes.push_back(absl::StrCat("config ", key, " = ", DisplayValue(key, value)));
      step.config_to_set[key] = value;
    } else if (old->second != value) {
      step.changes.push_back(absl::StrCat("config ", key, ": ", DisplayValue(key, old->second),
                                          " -> ", DisplayValue(key, value)));
      step.config_to_set[key] = value;
    }
  }
  if (!SameAdapter(current.adapter, desired.adapter)) {
    step.actions.push_back(v1::PLAN_ACTION_RECREATE);
    step.changes.push_back(
        current.adapter.kind() != desired.adapter.kind()
            ? absl::StrCat("adapter kind ", current.adapter.kind(), " -> ", desired.adapter.kind())
            : std::string("adapter changed (the manifest declares something else)"));
    const bool live = IsLive(current.state);
    step.restore_running = desired.spec->state() == v1::DESIRED_STATE_RUNNING ||
                           (desired.spec->state() == v1::DESIRED_STATE_UNSPECIFIED && live);
    step.config_to_set = desired.config;  // re-applied after re-registration (idempotent)
    return step;
  }
  if (step.labels != current.labels || !step.config_to_set.empty()) {
    step.actions.push_back(v1::PLAN_ACTION_UPDATE);
  }
  PlanState(desired, current.state, &step);
  return step;
}

}  // namespace

bool Step::Has(v1::PlanAction action) const {
  return std::find(actions.begin(), actions.end(), action) != actions.end();
}

std::vector<Step> ComputePlan(const std::vector<Desired>& desired,
                              const std::vector<Current>& current,
                              const std::vector<std::string>& fleets, bool prune) {
  std::map<std::string, const Current*> by_name;
  for (const Current& c : current) {
    by_name[c.name] = &c;
  }
  std::map<std::string, Step> steps;
  std::set<std::string> declared;
  for (const Desired& d : desired) {
    declared.insert(d.spec->name());
    const auto found = by_name.find(d.spec->name());
    if (found != by_name.end()) {
      steps[d.spec->name()] = PlanExisting(d, *found->second);
      continue;
    }
    Step step;
    step.name = d.spec->name();
    step.desired = &d;
    step.location = d.spec->location();
    step.labels = DesiredLabels(d);
    step.config_to_set = d.config;
    step.actions.push_back(v1::PLAN_ACTION_CREATE);
    for (const auto& [key, value] : d.config) {
      step.changes.push_back(absl::StrCat("config ", key, " = ", DisplayValue(key, value)));
    }
    if (d.spec->state() == v1::DESIRED_STATE_RUNNING) {
      step.actions.push_back(v1::PLAN_ACTION_START);
    }
    steps[step.name] = std::move(step);
  }
  if (prune) {
    const std::set<std::string> scope(fleets.begin(), fleets.end());
    for (const Current& c : current) {
      const auto owner = c.labels.find(std::string(contract::kFleetLabel));
      if (owner == c.labels.end() || scope.count(owner->second) == 0 || declared.count(c.name)) {
        continue;
      }
      Step step;
      step.name = c.name;
      step.actions.push_back(v1::PLAN_ACTION_PRUNE);
      step.changes.push_back(absl::StrCat("owned by fleet ", owner->second,
                                          " but no longer declared (home retained)"));
      steps[c.name] = std::move(step);
    }
  }
  std::vector<Step> ordered;
  ordered.reserve(steps.size());
  for (auto& [unused, step] : steps) {
    ordered.push_back(std::move(step));
  }
  return ordered;
}

std::string DisplayValue(const std::string& key, const std::string& value) {
  // A literal credential set by hand (`config set c model sk-...`) is shown no more than an
  // agent.* value: the plan goes to terminals and JSON.
  if (!value.starts_with("secret:") &&
      (key.starts_with("agent.") || LooksLikeCredential(key, value))) {
    return "****";
  }
  // Quoted as the fleet file would write it: a newline or an escape sequence in a value must not
  // reach the operator's terminal raw (export quotes the same way).
  return contract::QuoteTomlString(value);
}

}  // namespace ktesio::daemon::fleet
