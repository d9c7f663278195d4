#pragma once

// The POSIX process backend: every agent runs under its own ktesio-shim (forked by the shim
// launcher, shim_launcher.h, or spawned with posix_spawn; in a new session either way), which owns
// the agent's stdio and exit status so the agent outlives the daemon. Exits are observed through
// pidfds on the engine's event loop: no polling.
//
// Thread-safety: engine thread only.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "boost/asio/posix/stream_descriptor.hpp"
#include "process/backend.h"
#include "spdlog/logger.h"

namespace ktesio::daemon::process {

// Where ktesio-shim was looked for, and what was found.
struct ShimSearch {
  std::string path;                     // the executable found; "" when none
  std::vector<std::string> candidates;  // every place looked, in order, for the message
  // "" when found, else e.g. "ktesio-shim not found; looked in $KTESIO_SHIM (unset), /a/b".
  std::string Problem() const;
};

// Finds ktesio-shim: $KTESIO_SHIM, else next to the running executable (installed layout), else
// in ./shim/ beside it (build tree).
ShimSearch LocateShim();

// How new shims are started: forked by the shim launcher (falling back to an exec whenever the
// launcher cannot take a launch), or always exec'd.
enum class ShimStart { kLauncher, kExec };

class ShimBackend final : public ProcessBackend {
 public:
  // `locate` is asked again at a launch while no shim has been found, so installing the shim
  // after the daemon started needs no restart.
  // `log` gets the launcher's warnings (spdlog's default logger when null).
  ShimBackend(boost::asio::io_context& io, std::function<ShimSearch()> locate = LocateShim,
              ShimStart start = ShimStart::kLauncher,
              std::shared_ptr<spdlog::logger> log = nullptr);
  ~ShimBackend() override;

  std::string Problem() const override { return search_.Problem(); }

  void Launch(const LaunchSpec& spec, std::function<void(absl::StatusOr<Launched>)> done) override;
  bool WatchExit(const ProcessIdentity& shim, std::function<void()> on_exit) override;
  bool WatchRespawn(const ProcessIdentity& shim, const std::string& run_dir,
                    std::function<void()> on_respawn) override;
  absl::Status GrantRespawn(const std::string& run_dir, const RespawnGrant& grant) override;
  bool WithdrawRespawn(const std::string& run_dir) override;
  absl::StatusOr<std::optional<Respawned>> TakeRespawned(const std::string& run_dir) override;
  std::optional<ExitRecord> ReadExit(const std::string& run_dir) override;
  std::optional<Launched> UnconfirmedLaunch(const std::string& run_dir) override;
  absl::Status SignalGroup(pid_t leader, int signal) override;
  bool GroupAlive(pid_t leader) override;
  bool IsAlive(const ProcessIdentity& identity) override;
  absl::Status RunDetached(const std::string& exec, const std::vector<std::string>& args,
                           const std::vector<std::string>& env, const std::string& cwd,
                           std::chrono::milliseconds limit) override;

 private:
  struct Watch;
  class Spawner;
  void Arm(uint64_t id, std::function<void()> on_exit);
  // The owner-thread half of a launch, once the shim is spawned: reads its "started" line.
  void AwaitHandshake(pid_t shim_pid, int ready_fd, const std::string& exec,
                      const std::string& shim_log,
                      std::function<void(absl::StatusOr<Launched>)> done);
  void Reap(pid_t pid);

  boost::asio::io_context& io_;
  std::function<ShimSearch()> locate_;
  ShimSearch search_;
  ShimStart start_;
  std::shared_ptr<spdlog::logger> log_;
  uint64_t next_watch_ = 0;
  std::map<uint64_t, std::unique_ptr<Watch>> watches_;
  // Templates still running, by pid (= their process group), with their exec for the log. Their
  // limit is enforced by this backend's timers, so the ones left when it goes are killed then.
  std::map<pid_t, std::string> templates_;
  // Made at the first launch; declared last so that it is joined first, while every member its
  // queued launches use still exists.
  std::unique_ptr<Spawner> spawner_;
};

}  // namespace ktesio::daemon::process
