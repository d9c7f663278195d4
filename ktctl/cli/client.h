#pragma once

// The ktctl side of the API: one channel over the Unix socket, deadlines on every call, the API
// major check, and the translation of a failed call into an exit code and a message.

#include <chrono>
#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "ktesio/v1/agent.grpc.pb.h"
#include "ktesio/v1/config.grpc.pb.h"
#include "ktesio/v1/events.grpc.pb.h"
#include "ktesio/v1/fleet.grpc.pb.h"
#include "ktesio/v1/logs.grpc.pb.h"
#include "ktesio/v1/system.grpc.pb.h"

namespace ktesio::cli {

// A failed call, ready to report.
struct CallError {
  std::string reason;  // stable reason, e.g. NOT_FOUND
  std::string message;
  int exit_code = 1;
};

// Extracts reason and message from a non-OK status (details, else the trailer, else the code).
CallError ToCallError(const grpc::Status& status, const std::string& socket_path);

class Client {
 public:
  // `timeout` bounds every unary call.
  Client(std::string socket_path, std::chrono::milliseconds timeout);

  // Calls GetVersion and refuses another API major. On failure fills `error`.
  bool Handshake(v1::GetVersionResponse* version, CallError* error);

  // A context with the default deadline (or `timeout` when given).
  std::unique_ptr<grpc::ClientContext> NewContext() const;
  std::unique_ptr<grpc::ClientContext> NewContext(std::chrono::milliseconds timeout) const;

  v1::SystemService::Stub& system() { return *system_; }
  v1::AgentService::Stub& agents() { return *agents_; }
  v1::LogService::Stub& logs() { return *logs_; }
  v1::ConfigService::Stub& config() { return *config_; }
  v1::SecretService::Stub& secrets() { return *secrets_; }
  v1::EventService::Stub& events() { return *events_; }
  v1::FleetService::Stub& fleet() { return *fleet_; }
  const std::string& socket_path() const { return socket_path_; }

 private:
  std::string socket_path_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SystemService::Stub> system_;
  std::unique_ptr<v1::AgentService::Stub> agents_;
  std::unique_ptr<v1::LogService::Stub> logs_;
  std::unique_ptr<v1::ConfigService::Stub> config_;
  std::unique_ptr<v1::SecretService::Stub> secrets_;
  std::unique_ptr<v1::EventService::Stub> events_;
  std::unique_ptr<v1::FleetService::Stub> fleet_;
};

}  // namespace ktesio::cli
