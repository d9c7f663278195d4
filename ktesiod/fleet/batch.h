#pragma once

// AgentService.BatchAgents: one lifecycle verb on many instances at once. The instances are
// resolved from names, a label selector or "all", then every per-instance operation is started
// on the engine's owner thread at once (each completes asynchronously, as its single-instance
// RPC would); the call finishes when the last one has.
//
// A member already where the verb leads (start of a running instance, stop of a stopped one,
// pause of a paused one, resume of a running one) is reported ok with the notice
// "already <state>", not as an error: a batch describes a desired outcome for a set.
// The single-instance RPCs keep their strict transition rules.

#include "engine/engine.h"
#include "ktesio/v1/agent.pb.h"

namespace ktesio::daemon::fleet {

// Owner thread only. `finish` gets OK once every result is in, or an error when the request is
// malformed (INVALID_ARGUMENT/USAGE|INVALID_SELECTOR), selects nothing (NOT_FOUND/NO_MATCH) or
// the store cannot be read (INTERNAL/STORE_ERROR); then `response` is left empty.
void RunBatch(engine::Engine& engine, const v1::BatchAgentsRequest& request,
              v1::BatchAgentsResponse* response, engine::Engine::Finish finish);

// The verb's lower-case name ("start", ...), for messages.
std::string_view VerbName(v1::BatchVerb verb);

}  // namespace ktesio::daemon::fleet
