#pragma once

// The `v1` edge of the engine: each function translates one RPC's request into a call on an
// engine owner (in domain terms) and the owner's answer into the RPC's response. They run on the
// engine thread (RunUnary / RunUnaryAsync post them there); the services in services.cc only
// route. Errors are the owners', plus INVALID_ARGUMENT for a request that does not translate
// (an unknown enum value, a bad selector).

#include "absl/status/status.h"
#include "engine/engine.h"
#include "ktesio/v1/agent.pb.h"
#include "ktesio/v1/config.pb.h"
#include "ktesio/v1/logs.pb.h"
#include "ktesio/v1/system.pb.h"

namespace ktesio::daemon::api::rpc {

using Finish = engine::Engine::Finish;

// SystemService
absl::Status GetStatus(engine::Engine& engine, v1::GetStatusResponse* response);

// AgentService: registry and views (rpc_agents.cc)
absl::Status RegisterAgent(engine::Engine& engine, const v1::RegisterAgentRequest& request,
                           v1::RegisterAgentResponse* response);
absl::Status ListAgents(engine::Engine& engine, const v1::ListAgentsRequest& request,
                        v1::ListAgentsResponse* response);
absl::Status GetAgent(engine::Engine& engine, const v1::GetAgentRequest& request,
                      v1::GetAgentResponse* response);
absl::Status LabelAgent(engine::Engine& engine, const v1::LabelAgentRequest& request,
                        v1::LabelAgentResponse* response);
absl::Status GetUsage(engine::Engine& engine, const v1::GetUsageRequest& request,
                      v1::GetUsageResponse* response);

// AgentService: lifecycle (rpc_lifecycle.cc). Each answers with the command's notices and the
// instance as it is after the command.
void StartAgent(engine::Engine& engine, const v1::StartAgentRequest& request,
                v1::StartAgentResponse* response, Finish finish);
void StopAgent(engine::Engine& engine, const v1::StopAgentRequest& request,
               v1::StopAgentResponse* response, Finish finish);
void StopAllAgents(engine::Engine& engine, const v1::StopAllAgentsRequest& request,
                   v1::StopAllAgentsResponse* response, Finish finish);
void RestartAgent(engine::Engine& engine, const v1::RestartAgentRequest& request,
                  v1::RestartAgentResponse* response, Finish finish);
void PauseAgent(engine::Engine& engine, const v1::PauseAgentRequest& request,
                v1::PauseAgentResponse* response, Finish finish);
void ResumeAgent(engine::Engine& engine, const v1::ResumeAgentRequest& request,
                 v1::ResumeAgentResponse* response, Finish finish);
void SendInput(engine::Engine& engine, const v1::SendInputRequest& request,
               v1::SendInputResponse* response, Finish finish);
void RemoveAgent(engine::Engine& engine, const v1::RemoveAgentRequest& request,
                 v1::RemoveAgentResponse* response, Finish finish);

// ConfigService, SecretService and memory backings (rpc_config.cc)
absl::Status SetConfig(engine::Engine& engine, const v1::SetConfigRequest& request,
                       v1::SetConfigResponse* response);
absl::Status GetConfig(engine::Engine& engine, const v1::GetConfigRequest& request,
                       v1::GetConfigResponse* response);
absl::Status UnsetConfig(engine::Engine& engine, const v1::UnsetConfigRequest& request,
                         v1::UnsetConfigResponse* response);
absl::Status SetSecret(engine::Engine& engine, const v1::SetSecretRequest& request,
                       v1::SetSecretResponse* response);
absl::Status ListSecrets(engine::Engine& engine, v1::ListSecretsResponse* response);
absl::Status RemoveSecret(engine::Engine& engine, const v1::RemoveSecretRequest& request,
                          v1::RemoveSecretResponse* response);
absl::Status AttachMemory(engine::Engine& engine, const v1::AttachMemoryRequest& request,
                          v1::AttachMemoryResponse* response);
absl::Status DetachMemory(engine::Engine& engine, const v1::DetachMemoryRequest& request,
                          v1::DetachMemoryResponse* response);

// LogService (the follow is FollowLogsReactor's)
absl::Status ReadLogs(engine::Engine& engine, const v1::ReadLogsRequest& request,
                      v1::ReadLogsResponse* response);

}  // namespace ktesio::daemon::api::rpc
