#pragma once

// The gRPC service implementations of ktesio.v1. Handlers only translate: authorize, post to
// the engine, map the status. No business logic lives here.

#include "api/call.h"
#include "ktesio/v1/agent.grpc.pb.h"
#include "ktesio/v1/config.grpc.pb.h"
#include "ktesio/v1/events.grpc.pb.h"
#include "ktesio/v1/fleet.grpc.pb.h"
#include "ktesio/v1/logs.grpc.pb.h"
#include "ktesio/v1/system.grpc.pb.h"

namespace ktesio::daemon::api {

class SystemServiceImpl final : public v1::SystemService::CallbackService {
 public:
  explicit SystemServiceImpl(ApiContext& api) : api_(api) {}
  grpc::ServerUnaryReactor* GetVersion(grpc::CallbackServerContext* ctx,
                                       const v1::GetVersionRequest* request,
                                       v1::GetVersionResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;
  grpc::ServerWriteReactor<v1::BackupStoreResponse>* BackupStore(
      grpc::CallbackServerContext* ctx, const v1::BackupStoreRequest* request) override;

 private:
  ApiContext& api_;
};

class FleetServiceImpl final : public v1::FleetService::CallbackService {
 public:
  explicit FleetServiceImpl(ApiContext& api) : api_(api) {}
  grpc::ServerUnaryReactor* Apply(grpc::CallbackServerContext* ctx,
                                  const v1::ApplyFleetRequest* request,
                                  v1::ApplyFleetResponse* response) override;
  grpc::ServerUnaryReactor* Export(grpc::CallbackServerContext* ctx,
                                   const v1::ExportFleetRequest* request,
                                   v1::ExportFleetResponse* response) override;

 private:
  ApiContext& api_;
};

class AgentServiceImpl final : public v1::AgentService::CallbackService {
 public:
  explicit AgentServiceImpl(ApiContext& api) : api_(api) {}
  grpc::ServerUnaryReactor* RegisterAgent(grpc::CallbackServerContext* ctx,
                                          const v1::RegisterAgentRequest* request,
                                          v1::RegisterAgentResponse* response) override;
  grpc::ServerUnaryReactor* ListAgents(grpc::CallbackServerContext* ctx,
                                       const v1::ListAgentsRequest* request,
                                       v1::ListAgentsResponse* response) override;
  grpc::ServerUnaryReactor* GetAgent(grpc::CallbackServerContext* ctx,
                                     const v1::GetAgentRequest* request,
                                     v1::GetAgentResponse* response) override;
  grpc::ServerUnaryReactor* RemoveAgent(grpc::CallbackServerContext* ctx,
                                        const v1::RemoveAgentRequest* request,
                                        v1::RemoveAgentResponse* response) override;
  grpc::ServerUnaryReactor* StartAgent(grpc::CallbackServerContext* ctx,
                                       const v1::StartAgentRequest* request,
                                       v1::StartAgentResponse* response) override;
  grpc::ServerUnaryReactor* StopAgent(grpc::CallbackServerContext* ctx,
                                      const v1::StopAgentRequest* request,
                                      v1::StopAgentResponse* response) override;
  grpc::ServerUnaryReactor* StopAllAgents(grpc::CallbackServerContext* ctx,
                                          const v1::StopAllAgentsRequest* request,
                                          v1::StopAllAgentsResponse* response) override;
  grpc::ServerUnaryReactor* RestartAgent(grpc::CallbackServerContext* ctx,
                                         const v1::RestartAgentRequest* request,
                                         v1::RestartAgentResponse* response) override;
  grpc::ServerUnaryReactor* PauseAgent(grpc::CallbackServerContext* ctx,
                                       const v1::PauseAgentRequest* request,
                                       v1::PauseAgentResponse* response) override;
  grpc::ServerUnaryReactor* ResumeAgent(grpc::CallbackServerContext* ctx,
                                        const v1::ResumeAgentRequest* request,
                                        v1::ResumeAgentResponse* response) override;
  grpc::ServerUnaryReactor* SendInput(grpc::CallbackServerContext* ctx,
                                      const v1::SendInputRequest* request,
                                      v1::SendInputResponse* response) override;
  grpc::ServerUnaryReactor* GetUsage(grpc::CallbackServerContext* ctx,
                                     const v1::GetUsageRequest* request,
                                     v1::GetUsageResponse* response) override;
  grpc::ServerUnaryReactor* AttachMemory(grpc::CallbackServerContext* ctx,
                                         const v1::AttachMemoryRequest* request,
                                         v1::AttachMemoryResponse* response) override;
  grpc::ServerUnaryReactor* DetachMemory(grpc::CallbackServerContext* ctx,
                                         const v1::DetachMemoryRequest* request,
                                         v1::DetachMemoryResponse* response) override;
  grpc::ServerUnaryReactor* LabelAgent(grpc::CallbackServerContext* ctx,
                                       const v1::LabelAgentRequest* request,
                                       v1::LabelAgentResponse* response) override;
  grpc::ServerUnaryReactor* BatchAgents(grpc::CallbackServerContext* ctx,
                                        const v1::BatchAgentsRequest* request,
                                        v1::BatchAgentsResponse* response) override;

 private:
  ApiContext& api_;
};

class LogServiceImpl final : public v1::LogService::CallbackService {
 public:
  explicit LogServiceImpl(ApiContext& api) : api_(api) {}
  grpc::ServerUnaryReactor* ReadLogs(grpc::CallbackServerContext* ctx,
                                     const v1::ReadLogsRequest* request,
                                     v1::ReadLogsResponse* response) override;
  grpc::ServerWriteReactor<v1::FollowLogsResponse>* FollowLogs(
      grpc::CallbackServerContext* ctx, const v1::FollowLogsRequest* request) override;

 private:
  ApiContext& api_;
};

class ConfigServiceImpl final : public v1::ConfigService::CallbackService {
 public:
  explicit ConfigServiceImpl(ApiContext& api) : api_(api) {}
  grpc::ServerUnaryReactor* SetConfig(grpc::CallbackServerContext* ctx,
                                      const v1::SetConfigRequest* request,
                                      v1::SetConfigResponse* response) override;
  grpc::ServerUnaryReactor* GetConfig(grpc::CallbackServerContext* ctx,
                                      const v1::GetConfigRequest* request,
                                      v1::GetConfigResponse* response) override;
  grpc::ServerUnaryReactor* UnsetConfig(grpc::CallbackServerContext* ctx,
                                        const v1::UnsetConfigRequest* request,
                                        v1::UnsetConfigResponse* response) override;

 private:
  ApiContext& api_;
};

class SecretServiceImpl final : public v1::SecretService::CallbackService {
 public:
  explicit SecretServiceImpl(ApiContext& api) : api_(api) {}
  grpc::ServerUnaryReactor* SetSecret(grpc::CallbackServerContext* ctx,
                                      const v1::SetSecretRequest* request,
                                      v1::SetSecretResponse* response) override;
  grpc::ServerUnaryReactor* ListSecrets(grpc::CallbackServerContext* ctx,
                                        const v1::ListSecretsRequest* request,
                                        v1::ListSecretsResponse* response) override;
  grpc::ServerUnaryReactor* RemoveSecret(grpc::CallbackServerContext* ctx,
                                         const v1::RemoveSecretRequest* request,
                                         v1::RemoveSecretResponse* response) override;

 private:
  ApiContext& api_;
};

class EventServiceImpl final : public v1::EventService::CallbackService {
 public:
  explicit EventServiceImpl(ApiContext& api) : api_(api) {}
  grpc::ServerWriteReactor<v1::SubscribeEventsResponse>* SubscribeEvents(
      grpc::CallbackServerContext* ctx, const v1::SubscribeEventsRequest* request) override;

 private:
  ApiContext& api_;
};

}  // namespace ktesio::daemon::api
