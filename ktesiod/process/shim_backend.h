#pragma once

// The POSIX process backend: every agent runs under its own ktesio-shim (spawned with
// posix_spawn in a new session), which owns the agent's stdio and exit status so the agent
// outlives the daemon. Exits are observed through pidfds on the engine's event loop: no polling.
//
// Thread-safety: engine thread only.

#include <map>
#include <memory>
#include <string>

#include "boost/asio/io_context.hpp"
#include "boost/asio/posix/stream_descriptor.hpp"
#include "process/backend.h"

namespace ktesio::daemon::process {

class ShimBackend final : public ProcessBackend {
 public:
  ShimBackend(boost::asio::io_context& io, std::string shim_path);
  ~ShimBackend() override;

  void Launch(const LaunchSpec& spec, std::function<void(absl::StatusOr<Launched>)> done) override;
  bool WatchExit(const ProcessIdentity& shim, std::function<void()> on_exit) override;
  std::optional<ExitRecord> ReadExit(const std::string& run_dir) override;
  absl::Status SignalGroup(pid_t leader, int signal) override;
  bool GroupAlive(pid_t leader) override;
  bool IsAlive(const ProcessIdentity& identity) override;
  absl::Status RunDetached(const std::string& exec, const std::vector<std::string>& args,
                           const std::vector<std::string>& env, const std::string& cwd) override;

 private:
  struct Watch;
  void Arm(uint64_t id, std::function<void()> on_exit);
  void Reap(pid_t pid);

  boost::asio::io_context& io_;
  std::string shim_path_;
  uint64_t next_watch_ = 0;
  std::map<uint64_t, std::unique_ptr<Watch>> watches_;
};

// Finds ktesio-shim: $KTESIO_SHIM, else next to the running executable (installed layout), else
// in ./shim/ beside it (build tree). Returns "" when none is executable.
std::string LocateShim();

}  // namespace ktesio::daemon::process
