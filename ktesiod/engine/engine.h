#pragma once

// The engine: the single owner of all mutable daemon state (store, registry, and later the
// supervisor). It runs an Asio event loop on one thread; API handlers post work to it and
// complete their RPC from the posted function, so no handler ever blocks on the engine.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "ktesio/v1/agent.pb.h"
#include "ktesio/v1/system.pb.h"
#include "paths/paths.h"
#include "process/shim_backend.h"
#include "registry/registry.h"
#include "spdlog/logger.h"
#include "store/store.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::engine {

class Engine {
 public:
  // Opens the store under paths.state_dir. Errors: as store::Store::Open.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const DaemonPaths& paths,
                                                        std::shared_ptr<spdlog::logger> logger);
  ~Engine();

  // Starts the owner thread and reconciles instances with the OS. Stop() drains posted work.
  void Start();
  void Stop();

  // Runs `fn` on the owner thread. Thread-safe.
  template <typename Fn>
  void Post(Fn&& fn) {
    boost::asio::post(io_, std::forward<Fn>(fn));
  }

  // --- Owner-thread only below. ---

  absl::Status GetStatus(v1::GetStatusResponse* response);
  absl::Status RegisterAgent(const v1::RegisterAgentRequest& request,
                             v1::RegisterAgentResponse* response);
  absl::Status ListAgents(v1::ListAgentsResponse* response);
  absl::Status GetAgent(const v1::GetAgentRequest& request, v1::GetAgentResponse* response);
  // Asynchronous commands: `finish` is called on the owner thread when the command completes.
  using Finish = std::function<void(absl::Status)>;
  void RemoveAgent(const v1::RemoveAgentRequest& request, v1::RemoveAgentResponse* response,
                   Finish finish);
  void StartAgent(const v1::StartAgentRequest& request, v1::StartAgentResponse* response,
                  Finish finish);
  void StopAgent(const v1::StopAgentRequest& request, v1::StopAgentResponse* response,
                 Finish finish);
  void RestartAgent(const v1::RestartAgentRequest& request, v1::RestartAgentResponse* response,
                    Finish finish);
  void PauseAgent(const v1::PauseAgentRequest& request, v1::PauseAgentResponse* response,
                  Finish finish);
  void ResumeAgent(const v1::ResumeAgentRequest& request, v1::ResumeAgentResponse* response,
                   Finish finish);
  void SendInput(const v1::SendInputRequest& request, v1::SendInputResponse* response,
                 Finish finish);

  const DaemonPaths& paths() const { return paths_; }
  int64_t started_at_ms() const { return started_at_ms_; }

 private:
  Engine(DaemonPaths paths, std::unique_ptr<store::Store> store,
         std::shared_ptr<spdlog::logger> logger);
  // Fills `instance` from the store after a command; errors only when the row is unreadable.
  absl::Status Reload(const std::string& name, v1::AgentInstance* instance);

  DaemonPaths paths_;
  int64_t started_at_ms_ = 0;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<store::Store> store_;
  registry::Registry registry_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  process::ShimBackend backend_;
  supervisor::Supervisor supervisor_;
  std::thread thread_;
};

// Milliseconds since the Unix epoch.
int64_t NowUnixMs();

}  // namespace ktesio::daemon::engine
