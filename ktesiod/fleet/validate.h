#pragma once

// The whole-request validation of FleetService.Apply: every problem of every spec, before
// anything changes.

#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "fleet/plan.h"
#include "ktesio/v1/fleet.pb.h"

namespace ktesio::daemon::fleet {

// Fills `desired` (pointing into `request`) or returns INVALID_ARGUMENT/FLEET_INVALID whose
// message lists every problem, one per line, as "file:line: agents.NAME: ...".
absl::Status Validate(const v1::ApplyFleetRequest& request, std::vector<Desired>* desired);

// INVALID_ARGUMENT/FLEET_INVALID when the plan would take the daemon past max_instances.
absl::Status CheckLimit(const std::vector<Step>& plan, size_t current, uint64_t max_instances);

}  // namespace ktesio::daemon::fleet
