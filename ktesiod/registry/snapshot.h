#pragma once

// The registration snapshot: converting an adapter's declaration to the persisted wire form
// (ktesio.v1.AdapterSnapshot, stored in state.db) and rendering adapter.json for the Agent Home.

#include <string>

#include "ktesio/contract/declaration.h"
#include "ktesio/v1/common.pb.h"

namespace ktesio::daemon::registry {

v1::AdapterSnapshot ToSnapshot(const contract::AdapterDeclaration& declaration, bool builtin,
                               const std::string& manifest_path);

// The inverse of ToSnapshot (fields the snapshot does not carry are left default).
contract::AdapterDeclaration FromSnapshot(const v1::AdapterSnapshot& snapshot);

v1::SupportLevel ToProto(contract::SupportLevel level);
contract::SupportLevel FromProto(v1::SupportLevel level);
// "guaranteed" | "best-effort" | "unsupported"
std::string SupportLevelWire(v1::SupportLevel level);

// The current-OS projection of a snapshot's declaration.
v1::ProjectedCapabilities Project(const v1::AdapterSnapshot& snapshot);

// adapter.json: {"schema_version":1,"kind","display_name","contract_version","builtin",
// "capabilities":{cap:{os:level}},"metering_source","interaction_channel","config":{key:target},
// "start":{exec,args,env},"stop"?,"pause"?,"resume"?}
std::string RenderAdapterJson(const v1::AdapterSnapshot& snapshot);

}  // namespace ktesio::daemon::registry
