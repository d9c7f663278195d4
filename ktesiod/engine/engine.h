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
#include "registry/registry.h"
#include "store/store.h"

namespace ktesio::daemon::engine {

class Engine {
 public:
  // Opens the store under paths.state_dir. Errors: as store::Store::Open.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const DaemonPaths& paths);
  ~Engine();

  // Starts / stops the owner thread. Stop() drains posted work first.
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
  absl::Status RemoveAgent(const v1::RemoveAgentRequest& request,
                           v1::RemoveAgentResponse* response);

  const DaemonPaths& paths() const { return paths_; }
  int64_t started_at_ms() const { return started_at_ms_; }

 private:
  Engine(DaemonPaths paths, std::unique_ptr<store::Store> store);

  DaemonPaths paths_;
  int64_t started_at_ms_ = 0;
  std::unique_ptr<store::Store> store_;
  registry::Registry registry_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

// Milliseconds since the Unix epoch.
int64_t NowUnixMs();

}  // namespace ktesio::daemon::engine
