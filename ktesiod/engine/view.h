#pragma once

// Read views: turning stored rows into the API's AgentInstance and FleetTotals.

#include "ktesio/v1/agent.pb.h"
#include "store/store.h"

namespace ktesio::daemon::engine {

// Wire string <-> enum for lifecycle states ("registered", "running", ...).
v1::AgentState StateFromWire(const std::string& state);
std::string StateToWire(v1::AgentState state);

// Builds the AgentInstance of `row`. Usage and budget are filled by their owners later; until
// then usage is all zeros and the budget is absent.
v1::AgentInstance BuildInstanceView(const store::InstanceRow& row);

// Sums the usage views of `instances`.
v1::FleetTotals BuildFleetTotals(
    const google::protobuf::RepeatedPtrField<v1::AgentInstance>& instances);

}  // namespace ktesio::daemon::engine
