#include "api/services.h"

#include "fleet/apply.h"
#include "fleet/batch.h"

#include "api/backup_store.h"
#include "api/follow_logs.h"
#include "api/rpc.h"
#include "api/subscribe_events.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/error.h"
#include "ktesio/v1/version.h"

namespace ktesio::daemon::api {
namespace {

namespace reason = contract::reason;

}  // namespace

// --- SystemService ---

grpc::ServerUnaryReactor* SystemServiceImpl::GetVersion(grpc::CallbackServerContext* ctx,
                                                        const v1::GetVersionRequest* request,
                                                        v1::GetVersionResponse* response) {
  // Answered inline: constant data, and it must work even for callers that fail authorization
  // so that clients can report an API mismatch before anything else.
  (void)request;
  response->set_daemon_version(std::string(v1::kKtesioVersion));
  response->set_api_version(std::string(v1::kApiVersion));
  response->set_api_major(v1::kApiMajor);
  response->set_contract_version(std::string(contract::kContractVersion));
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<v1::BackupStoreResponse>* SystemServiceImpl::BackupStore(
    grpc::CallbackServerContext* ctx, const v1::BackupStoreRequest* /*request*/) {
  return new BackupStoreReactor(api_, ctx);
}

grpc::ServerUnaryReactor* SystemServiceImpl::GetStatus(grpc::CallbackServerContext* ctx,
                                                       const v1::GetStatusRequest* request,
                                                       v1::GetStatusResponse* response) {
  return RunUnary(api_, ctx, request, response, "GetStatus", false,
                  [this](const v1::GetStatusRequest&, v1::GetStatusResponse* out) {
                    return rpc::GetStatus(*api_.engine, out);
                  });
}

// --- AgentService ---

grpc::ServerUnaryReactor* AgentServiceImpl::RegisterAgent(grpc::CallbackServerContext* ctx,
                                                          const v1::RegisterAgentRequest* request,
                                                          v1::RegisterAgentResponse* response) {
  return RunUnary(api_, ctx, request, response, "RegisterAgent", true,
                  [this](const v1::RegisterAgentRequest& in, v1::RegisterAgentResponse* out) {
                    return rpc::RegisterAgent(*api_.engine, in, out);
                  });
}

grpc::ServerUnaryReactor* AgentServiceImpl::ListAgents(grpc::CallbackServerContext* ctx,
                                                       const v1::ListAgentsRequest* request,
                                                       v1::ListAgentsResponse* response) {
  return RunUnary(api_, ctx, request, response, "ListAgents", false,
                  [this](const v1::ListAgentsRequest& in, v1::ListAgentsResponse* out) {
                    return rpc::ListAgents(*api_.engine, in, out);
                  });
}

grpc::ServerUnaryReactor* AgentServiceImpl::LabelAgent(grpc::CallbackServerContext* ctx,
                                                       const v1::LabelAgentRequest* request,
                                                       v1::LabelAgentResponse* response) {
  return RunUnary(api_, ctx, request, response, "LabelAgent", true,
                  [this](const v1::LabelAgentRequest& in, v1::LabelAgentResponse* out) {
                    return rpc::LabelAgent(*api_.engine, in, out);
                  });
}

grpc::ServerUnaryReactor* AgentServiceImpl::BatchAgents(grpc::CallbackServerContext* ctx,
                                                        const v1::BatchAgentsRequest* request,
                                                        v1::BatchAgentsResponse* response) {
  return RunUnaryAsync(api_, ctx, request, response, "BatchAgents",
                       [this](const v1::BatchAgentsRequest& in, v1::BatchAgentsResponse* out,
                              engine::Engine::Finish finish) {
                         fleet::RunBatch(*api_.engine, in, out, std::move(finish));
                       });
}

grpc::ServerUnaryReactor* FleetServiceImpl::Apply(grpc::CallbackServerContext* ctx,
                                                  const v1::ApplyFleetRequest* request,
                                                  v1::ApplyFleetResponse* response) {
  if (request->dry_run()) {
    return RunUnaryAsync(api_, ctx, request, response, "ApplyFleet(dry-run)",
                         [this](const v1::ApplyFleetRequest& in, v1::ApplyFleetResponse* out,
                                engine::Engine::Finish finish) {
                           fleet::Apply(*api_.engine, in, out, std::move(finish));
                         });
  }
  return RunUnaryAsync(api_, ctx, request, response, "ApplyFleet",
                       [this](const v1::ApplyFleetRequest& in, v1::ApplyFleetResponse* out,
                              engine::Engine::Finish finish) {
                         fleet::Apply(*api_.engine, in, out, std::move(finish));
                       });
}

grpc::ServerUnaryReactor* FleetServiceImpl::Export(grpc::CallbackServerContext* ctx,
                                                   const v1::ExportFleetRequest* request,
                                                   v1::ExportFleetResponse* response) {
  return RunUnary(api_, ctx, request, response, "ExportFleet", false,
                  [this](const v1::ExportFleetRequest& in, v1::ExportFleetResponse* out) {
                    return fleet::Export(*api_.engine, in, out);
                  });
}

grpc::ServerUnaryReactor* AgentServiceImpl::GetAgent(grpc::CallbackServerContext* ctx,
                                                     const v1::GetAgentRequest* request,
                                                     v1::GetAgentResponse* response) {
  return RunUnary(api_, ctx, request, response, "GetAgent", false,
                  [this](const v1::GetAgentRequest& in, v1::GetAgentResponse* out) {
                    return rpc::GetAgent(*api_.engine, in, out);
                  });
}

grpc::ServerUnaryReactor* AgentServiceImpl::RemoveAgent(grpc::CallbackServerContext* ctx,
                                                        const v1::RemoveAgentRequest* request,
                                                        v1::RemoveAgentResponse* response) {
  return RunUnaryAsync(api_, ctx, request, response, "RemoveAgent",
                       [this](const v1::RemoveAgentRequest& in, v1::RemoveAgentResponse* out,
                              engine::Engine::Finish finish) {
                         rpc::RemoveAgent(*api_.engine, in, out, std::move(finish));
                       });
}

grpc::ServerUnaryReactor* AgentServiceImpl::StartAgent(grpc::CallbackServerContext* ctx,
                                                       const v1::StartAgentRequest* request,
                                                       v1::StartAgentResponse* response) {
  return RunUnaryAsync(api_, ctx, request, response, "StartAgent",
                       [this](const v1::StartAgentRequest& in, v1::StartAgentResponse* out,
                              engine::Engine::Finish finish) {
                         rpc::StartAgent(*api_.engine, in, out, std::move(finish));
                       });
}

grpc::ServerUnaryReactor* AgentServiceImpl::StopAgent(grpc::CallbackServerContext* ctx,
                                                      const v1::StopAgentRequest* request,
                                                      v1::StopAgentResponse* response) {
  return RunUnaryAsync(api_, ctx, request, response, "StopAgent",
                       [this](const v1::StopAgentRequest& in, v1::StopAgentResponse* out,
                              engine::Engine::Finish finish) {
                         rpc::StopAgent(*api_.engine, in, out, std::move(finish));
                       });
}

grpc::ServerUnaryReactor* AgentServiceImpl::StopAllAgents(grpc::CallbackServerContext* ctx,
                                                          const v1::StopAllAgentsRequest* request,
                                                          v1::StopAllAgentsResponse* response) {
  return RunUnaryAsync(api_, ctx, request, response, "StopAllAgents",
                       [this](const v1::StopAllAgentsRequest& in, v1::StopAllAgentsResponse* out,
                              engine::Engine::Finish finish) {
                         rpc::StopAllAgents(*api_.engine, in, out, std::move(finish));
                       });
}

grpc::ServerUnaryReactor* AgentServiceImpl::RestartAgent(grpc::CallbackServerContext* ctx,
                                                         const v1::RestartAgentRequest* request,
                                                         v1::RestartAgentResponse* response) {
  return RunUnaryAsync(api_, ctx, request, response, "RestartAgent",
                       [this](const v1::RestartAgentRequest& in, v1::RestartAgentResponse* out,
                              engine::Engine::Finish finish) {
                         rpc::RestartAgent(*api_.engine, in, out, std::move(finish));
                       });
}

grpc::ServerUnaryReactor* AgentServiceImpl::PauseAgent(grpc::CallbackServerContext* ctx,
                                                       const v1::PauseAgentRequest* request,
                                                       v1::PauseAgentResponse* response) {
  return RunUnaryAsync(api_, ctx, request, response, "PauseAgent",
                       [this](const v1::PauseAgentRequest& in, v1::PauseAgentResponse* out,
                              engine::Engine::Finish finish) {
                         rpc::PauseAgent(*api_.engine, in, out, std::move(finish));
                       });
}

grpc::ServerUnaryReactor* AgentServiceImpl::ResumeAgent(grpc::CallbackServerContext* ctx,
                                                        const v1::ResumeAgentRequest* request,
                                                        v1::ResumeAgentResponse* response) {
  return RunUnaryAsync(api_, ctx, request, response, "ResumeAgent",
                       [this](const v1::ResumeAgentRequest& in, v1::ResumeAgentResponse* out,
                              engine::Engine::Finish finish) {
                         rpc::ResumeAgent(*api_.engine, in, out, std::move(finish));
                       });
}

grpc::ServerUnaryReactor* AgentServiceImpl::SendInput(grpc::CallbackServerContext* ctx,
                                                      const v1::SendInputRequest* request,
                                                      v1::SendInputResponse* response) {
  return RunUnaryAsync(api_, ctx, request, response, "SendInput",
                       [this](const v1::SendInputRequest& in, v1::SendInputResponse* out,
                              engine::Engine::Finish finish) {
                         rpc::SendInput(*api_.engine, in, out, std::move(finish));
                       });
}

grpc::ServerUnaryReactor* AgentServiceImpl::GetUsage(grpc::CallbackServerContext* ctx,
                                                     const v1::GetUsageRequest* request,
                                                     v1::GetUsageResponse* response) {
  return RunUnary(api_, ctx, request, response, "GetUsage", false,
                  [this](const v1::GetUsageRequest& in, v1::GetUsageResponse* out) {
                    return rpc::GetUsage(*api_.engine, in, out);
                  });
}

grpc::ServerUnaryReactor* AgentServiceImpl::AttachMemory(grpc::CallbackServerContext* ctx,
                                                         const v1::AttachMemoryRequest* request,
                                                         v1::AttachMemoryResponse* response) {
  return RunUnary(api_, ctx, request, response, "AttachMemory", true,
                  [this](const v1::AttachMemoryRequest& in, v1::AttachMemoryResponse* out) {
                    return rpc::AttachMemory(*api_.engine, in, out);
                  });
}

grpc::ServerUnaryReactor* AgentServiceImpl::DetachMemory(grpc::CallbackServerContext* ctx,
                                                         const v1::DetachMemoryRequest* request,
                                                         v1::DetachMemoryResponse* response) {
  return RunUnary(api_, ctx, request, response, "DetachMemory", true,
                  [this](const v1::DetachMemoryRequest& in, v1::DetachMemoryResponse* out) {
                    return rpc::DetachMemory(*api_.engine, in, out);
                  });
}

// --- LogService ---

grpc::ServerUnaryReactor* LogServiceImpl::ReadLogs(grpc::CallbackServerContext* ctx,
                                                   const v1::ReadLogsRequest* request,
                                                   v1::ReadLogsResponse* response) {
  return RunUnary(api_, ctx, request, response, "ReadLogs", false,
                  [this](const v1::ReadLogsRequest& in, v1::ReadLogsResponse* out) {
                    return rpc::ReadLogs(*api_.engine, in, out);
                  });
}

grpc::ServerWriteReactor<v1::FollowLogsResponse>* LogServiceImpl::FollowLogs(
    grpc::CallbackServerContext* ctx, const v1::FollowLogsRequest* request) {
  return new FollowLogsReactor(api_, ctx, *request);
}

// --- ConfigService / SecretService ---

grpc::ServerUnaryReactor* ConfigServiceImpl::SetConfig(grpc::CallbackServerContext* ctx,
                                                       const v1::SetConfigRequest* request,
                                                       v1::SetConfigResponse* response) {
  return RunUnary(api_, ctx, request, response, "SetConfig", true,
                  [this](const v1::SetConfigRequest& in, v1::SetConfigResponse* out) {
                    return rpc::SetConfig(*api_.engine, in, out);
                  });
}

grpc::ServerUnaryReactor* ConfigServiceImpl::GetConfig(grpc::CallbackServerContext* ctx,
                                                       const v1::GetConfigRequest* request,
                                                       v1::GetConfigResponse* response) {
  return RunUnary(api_, ctx, request, response, "GetConfig", false,
                  [this](const v1::GetConfigRequest& in, v1::GetConfigResponse* out) {
                    return rpc::GetConfig(*api_.engine, in, out);
                  });
}

grpc::ServerUnaryReactor* ConfigServiceImpl::UnsetConfig(grpc::CallbackServerContext* ctx,
                                                         const v1::UnsetConfigRequest* request,
                                                         v1::UnsetConfigResponse* response) {
  return RunUnary(api_, ctx, request, response, "UnsetConfig", true,
                  [this](const v1::UnsetConfigRequest& in, v1::UnsetConfigResponse* out) {
                    return rpc::UnsetConfig(*api_.engine, in, out);
                  });
}

grpc::ServerUnaryReactor* SecretServiceImpl::SetSecret(grpc::CallbackServerContext* ctx,
                                                       const v1::SetSecretRequest* request,
                                                       v1::SetSecretResponse* response) {
  return RunUnary(api_, ctx, request, response, "SetSecret", true,
                  [this](const v1::SetSecretRequest& in, v1::SetSecretResponse* out) {
                    return rpc::SetSecret(*api_.engine, in, out);
                  });
}

grpc::ServerUnaryReactor* SecretServiceImpl::ListSecrets(grpc::CallbackServerContext* ctx,
                                                         const v1::ListSecretsRequest* request,
                                                         v1::ListSecretsResponse* response) {
  return RunUnary(api_, ctx, request, response, "ListSecrets", false,
                  [this](const v1::ListSecretsRequest& in, v1::ListSecretsResponse* out) {
                    (void)in;
                    return rpc::ListSecrets(*api_.engine, out);
                  });
}

grpc::ServerUnaryReactor* SecretServiceImpl::RemoveSecret(grpc::CallbackServerContext* ctx,
                                                          const v1::RemoveSecretRequest* request,
                                                          v1::RemoveSecretResponse* response) {
  return RunUnary(api_, ctx, request, response, "RemoveSecret", true,
                  [this](const v1::RemoveSecretRequest& in, v1::RemoveSecretResponse* out) {
                    return rpc::RemoveSecret(*api_.engine, in, out);
                  });
}

// --- EventService ---

grpc::ServerWriteReactor<v1::SubscribeEventsResponse>* EventServiceImpl::SubscribeEvents(
    grpc::CallbackServerContext* ctx, const v1::SubscribeEventsRequest* request) {
  return new SubscribeEventsReactor(api_, ctx, *request);
}

}  // namespace ktesio::daemon::api
