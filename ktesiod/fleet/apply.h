#pragma once

// FleetService: Apply (validate everything, plan, carry out) and Export, on the engine's owner
// thread, through the engine's own operations, so an applied fleet behaves exactly as the same
// commands typed one by one (docs/fleet-file.md).

#include "engine/engine.h"
#include "ktesio/v1/fleet.pb.h"

namespace ktesio::daemon::fleet {

// Owner thread only. `finish` gets OK with the steps (per-step failures inside), or
// INVALID_ARGUMENT/FLEET_INVALID naming every problem ("file:line: ..."), or a store error;
// nothing has changed in the error cases.
void Apply(engine::Engine& engine, const v1::ApplyFleetRequest& request,
           v1::ApplyFleetResponse* response, engine::Engine::Finish finish);

// The current instances (optionally selected) as a fleet file.
absl::Status Export(engine::Engine& engine, const v1::ExportFleetRequest& request,
                    v1::ExportFleetResponse* response);

// True when a literal `value` for `key` looks like a credential that belongs in the secrets
// store (keys named like *KEY*, *TOKEN*, *SECRET*, *PASSWORD*; values shaped like API keys).
bool LooksLikeCredential(std::string_view key, std::string_view value);

}  // namespace ktesio::daemon::fleet
