#pragma once

// A process::ProcessBackend without processes, for unit tests of the supervisor and the engine:
// launches hand out made-up pids, exits happen when the test says so (or when a signal would
// end the group), and every signal and helper command is recorded. Completions are posted to
// the io_context like the real backend's, so a test runs `io.poll()` to let them land.

#include <signal.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "process/backend.h"

namespace ktesio::testing {

class FakeProcessBackend final : public daemon::process::ProcessBackend {
 public:
  using LaunchSpec = daemon::process::LaunchSpec;
  using Launched = daemon::process::Launched;
  using ExitRecord = daemon::process::ExitRecord;
  using ProcessIdentity = daemon::process::ProcessIdentity;

  struct Signal {
    pid_t group;
    int signal;
  };

  explicit FakeProcessBackend(boost::asio::io_context& io) : io_(io) {}

  // --- what the test controls ---

  // The next launch fails with `status` (once).
  void FailNextLaunch(absl::Status status) { next_launch_error_ = std::move(status); }
  // Whether a group ends on SIGTERM (a well-behaved agent) and on SIGKILL (always, unless the
  // test simulates an unkillable process in uninterruptible sleep).
  void set_exits_on_sigterm(bool value) { exits_on_sigterm_ = value; }
  void set_exits_on_sigkill(bool value) { exits_on_sigkill_ = value; }
  void set_problem(std::string problem) { problem_ = std::move(problem); }

  // The agent `agent` ends with `record`: the shim writes it down and exits.
  void Exit(pid_t agent, ExitRecord record) {
    auto it = procs_.find(agent);
    if (it == procs_.end() || !it->second.alive) {
      return;
    }
    Proc& proc = it->second;
    proc.alive = false;
    exits_[proc.spec.run_dir] = record;
    if (proc.on_exit) {
      boost::asio::post(io_, std::exchange(proc.on_exit, nullptr));
    }
  }
  // The shim vanishes without an exit record (SIGKILLed, OOM).
  void Vanish(pid_t agent) {
    auto it = procs_.find(agent);
    if (it == procs_.end() || !it->second.alive) {
      return;
    }
    it->second.alive = false;
    if (it->second.on_exit) {
      boost::asio::post(io_, std::exchange(it->second.on_exit, nullptr));
    }
  }

  // The daemon that watched the shims is gone (a restart): its exit watches go with it; the
  // processes stay.
  void DropWatches() {
    for (auto& [agent, proc] : procs_) {
      proc.on_exit = nullptr;
    }
  }

  // --- what the test reads ---

  const std::vector<LaunchSpec>& launches() const { return launches_; }
  const std::vector<Signal>& signals() const { return signals_; }
  const std::vector<std::string>& detached() const { return detached_; }
  // The environment (NAME=VALUE) of each detached command, in the same order.
  const std::vector<std::vector<std::string>>& detached_env() const { return detached_env_; }
  // The agent pid of the latest launch (0 before any).
  pid_t last_agent() const { return last_agent_; }
  // How many times `signal` went to `group`.
  int SignalsSent(pid_t group, int signal) const {
    int count = 0;
    for (const Signal& sent : signals_) {
      count += sent.group == group && sent.signal == signal ? 1 : 0;
    }
    return count;
  }

  // --- ProcessBackend ---

  std::string Problem() const override { return problem_; }

  void Launch(const LaunchSpec& spec, std::function<void(absl::StatusOr<Launched>)> done) override {
    launches_.push_back(spec);
    if (!next_launch_error_.ok()) {
      boost::asio::post(
          io_, [done = std::move(done),
                error = std::exchange(next_launch_error_, absl::OkStatus())] { done(error); });
      return;
    }
    const pid_t agent = next_pid_;
    next_pid_ += 2;  // the shim takes agent + 1
    exits_.erase(spec.run_dir);
    procs_[agent] = Proc{spec, true, nullptr};
    last_agent_ = agent;
    Launched launched{{agent, StartTime(agent)}, {agent + 1, StartTime(agent + 1)}};
    boost::asio::post(io_, [done = std::move(done), launched] { done(launched); });
  }

  bool WatchExit(const ProcessIdentity& shim, std::function<void()> on_exit) override {
    auto it = procs_.find(shim.pid - 1);
    if (it == procs_.end() || shim.start_time != StartTime(shim.pid)) {
      return false;
    }
    if (!it->second.alive) {
      boost::asio::post(io_, std::move(on_exit));
      return true;
    }
    it->second.on_exit = std::move(on_exit);
    return true;
  }

  std::optional<ExitRecord> ReadExit(const std::string& run_dir) override {
    auto it = exits_.find(run_dir);
    if (it == exits_.end()) {
      return std::nullopt;
    }
    return it->second;
  }

  // The live process launched into `run_dir`, as a shim's pid files would name it.
  std::optional<Launched> UnconfirmedLaunch(const std::string& run_dir) override {
    for (const auto& [agent, proc] : procs_) {
      if (proc.alive && proc.spec.run_dir == run_dir) {
        return Launched{{agent, StartTime(agent)}, {agent + 1, StartTime(agent + 1)}};
      }
    }
    return std::nullopt;
  }

  absl::Status SignalGroup(pid_t leader, int signal) override {
    signals_.push_back({leader, signal});
    auto it = procs_.find(leader);
    if (it == procs_.end() || !it->second.alive) {
      return absl::NotFoundError("no such process group");
    }
    if ((signal == SIGTERM && exits_on_sigterm_) || (signal == SIGKILL && exits_on_sigkill_)) {
      Exit(leader, {ExitRecord::Kind::kSignaled, signal});
    }
    return absl::OkStatus();
  }

  bool GroupAlive(pid_t leader) override {
    auto it = procs_.find(leader);
    return it != procs_.end() && it->second.alive;
  }

  bool IsAlive(const ProcessIdentity& identity) override {
    const pid_t agent = identity.pid % 2 == 0 ? identity.pid - 1 : identity.pid;
    auto it = procs_.find(agent);
    return it != procs_.end() && it->second.alive && identity.start_time == StartTime(identity.pid);
  }

  absl::Status RunDetached(const std::string& exec, const std::vector<std::string>& /*args*/,
                           const std::vector<std::string>& env,
                           const std::string& /*cwd*/) override {
    detached_.push_back(exec);
    detached_env_.push_back(env);
    return absl::OkStatus();
  }

 private:
  struct Proc {
    LaunchSpec spec;
    bool alive = true;
    std::function<void()> on_exit;
  };

  static int64_t StartTime(pid_t pid) { return int64_t{pid} * 7; }

  boost::asio::io_context& io_;
  pid_t next_pid_ = 1001;  // agents odd, their shims the even pid after
  pid_t last_agent_ = 0;
  absl::Status next_launch_error_;
  bool exits_on_sigterm_ = true;
  bool exits_on_sigkill_ = true;
  std::string problem_;
  std::map<pid_t, Proc> procs_;  // by agent pid
  std::map<std::string, ExitRecord> exits_;
  std::vector<LaunchSpec> launches_;
  std::vector<Signal> signals_;
  std::vector<std::string> detached_;
  std::vector<std::vector<std::string>> detached_env_;
};

}  // namespace ktesio::testing
