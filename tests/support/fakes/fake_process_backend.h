#pragma once

// A process::ProcessBackend without processes, for unit tests of the supervisor and the engine:
// launches hand out made-up pids, exits happen when the test says so (or when a signal would
// end the group), and every signal and helper command is recorded. Completions are posted to
// the io_context like the real backend's, so a test runs `io.poll()` to let them land.

#include <signal.h>

#include <map>
#include <optional>
#include <set>
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
  using RespawnGrant = daemon::process::RespawnGrant;
  using Respawned = daemon::process::Respawned;

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
  // Whether run dirs can be watched for relaunch records (inotify out of watches otherwise).
  void set_run_dirs_watchable(bool value) { run_dirs_watchable_ = value; }
  // The wall clock the fake shim stamps relaunches with (Unix ms).
  void set_now_ms(int64_t now_ms) { now_ms_ = now_ms; }

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
  // The agent `agent` ends with `record` after `run_ms`; its shim relaunches it when the grant
  // in its run dir covers that exit (as the real shim does), else ends as Exit() does. Returns
  // the relaunched agent's pid, or 0.
  pid_t ExitUnderGrant(pid_t agent, ExitRecord record, int64_t run_ms) {
    auto it = procs_.find(agent);
    if (it == procs_.end() || !it->second.alive) {
      return 0;
    }
    const std::string run_dir = it->second.spec.run_dir;
    auto grant = grants_.find(run_dir);
    const bool clean = record.kind == ExitRecord::Kind::kExited && record.value == 0;
    const int64_t after = grant == grants_.end() ? -1
                                                 : (clean ? grant->second.clean_after_ms
                                                          : grant->second.crash_after_ms);
    if (after < 0 || run_ms < after) {
      Exit(agent, record);
      return 0;
    }
    grants_.erase(grant);
    Proc relaunched = std::move(it->second);
    it->second = Proc{relaunched.spec, false, nullptr, relaunched.shim, nullptr};
    const pid_t next = next_pid_;
    next_pid_ += 2;
    relaunched.alive = true;
    respawned_[run_dir] = Respawned{record, run_ms, {next, StartTime(next)}, now_ms_};
    if (relaunched.on_respawn) {
      boost::asio::post(io_, relaunched.on_respawn);
    }
    procs_[next] = std::move(relaunched);
    last_agent_ = next;
    return next;
  }
  // Leaves an unreadable relaunch record in the run dir of `agent` (alive) and wakes the watch,
  // as a damaged file would.
  void DamageRelaunchRecord(pid_t agent) {
    auto it = procs_.find(agent);
    if (it == procs_.end()) {
      return;
    }
    unreadable_.insert(it->second.spec.run_dir);
    if (it->second.on_respawn) {
      boost::asio::post(io_, it->second.on_respawn);
    }
  }
  // The grant the supervisor left in `run_dir`, if any.
  std::optional<RespawnGrant> GrantIn(const std::string& run_dir) const {
    auto it = grants_.find(run_dir);
    return it == grants_.end() ? std::nullopt : std::optional<RespawnGrant>(it->second);
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
      proc.on_respawn = nullptr;
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
    grants_.erase(spec.run_dir);  // the new shim removes stale grants and records
    respawned_.erase(spec.run_dir);
    procs_[agent] = Proc{spec, true, nullptr, agent + 1, nullptr};
    last_agent_ = agent;
    Launched launched{{agent, StartTime(agent)}, {agent + 1, StartTime(agent + 1)}, 0};
    boost::asio::post(io_, [done = std::move(done), launched] { done(launched); });
  }

  bool WatchExit(const ProcessIdentity& shim, std::function<void()> on_exit) override {
    auto it = ProcOfShim(shim.pid);
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

  bool WatchRespawn(const ProcessIdentity& shim, const std::string& /*run_dir*/,
                    std::function<void()> on_respawn) override {
    auto it = ProcOfShim(shim.pid);
    if (it == procs_.end() || !run_dirs_watchable_) {
      return false;
    }
    it->second.on_respawn = std::move(on_respawn);
    return true;
  }

  absl::Status GrantRespawn(const std::string& run_dir, const RespawnGrant& grant) override {
    grants_[run_dir] = grant;
    return absl::OkStatus();
  }

  bool WithdrawRespawn(const std::string& run_dir) override { return grants_.erase(run_dir) > 0; }

  absl::StatusOr<std::optional<Respawned>> TakeRespawned(const std::string& run_dir) override {
    if (unreadable_.erase(run_dir) > 0) {
      return absl::DataLossError("the relaunch record in " + run_dir + " is malformed");
    }
    auto it = respawned_.find(run_dir);
    if (it == respawned_.end()) {
      return std::nullopt;
    }
    Respawned taken = it->second;
    respawned_.erase(it);
    return taken;
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
        return Launched{{agent, StartTime(agent)}, {proc.shim, StartTime(proc.shim)}, 0};
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
    auto it = identity.pid % 2 == 0 ? ProcOfShim(identity.pid) : procs_.find(identity.pid);
    return it != procs_.end() && it->second.alive && identity.start_time == StartTime(identity.pid);
  }

  absl::Status RunDetached(const std::string& exec, const std::vector<std::string>& /*args*/,
                           const std::vector<std::string>& env, const std::string& /*cwd*/,
                           std::chrono::milliseconds /*limit*/) override {
    detached_.push_back(exec);
    detached_env_.push_back(env);
    return absl::OkStatus();
  }

 private:
  struct Proc {
    LaunchSpec spec;
    bool alive = true;
    std::function<void()> on_exit;
    pid_t shim = 0;  // the launch's agent pid + 1; a relaunched agent keeps its shim
    std::function<void()> on_respawn;
  };

  // The process entry a shim pid stands for: its live agent, else its latest one.
  std::map<pid_t, Proc>::iterator ProcOfShim(pid_t shim) {
    auto found = procs_.end();
    for (auto it = procs_.begin(); it != procs_.end(); ++it) {
      if (it->second.shim == shim && (found == procs_.end() || it->second.alive)) {
        found = it;
      }
    }
    return found;
  }

  static int64_t StartTime(pid_t pid) { return int64_t{pid} * 7; }

  boost::asio::io_context& io_;
  pid_t next_pid_ = 1001;  // agents odd, their shims the even pid after
  pid_t last_agent_ = 0;
  absl::Status next_launch_error_;
  bool exits_on_sigterm_ = true;
  bool run_dirs_watchable_ = true;
  int64_t now_ms_ = 0;
  bool exits_on_sigkill_ = true;
  std::string problem_;
  std::map<pid_t, Proc> procs_;  // by agent pid
  std::map<std::string, ExitRecord> exits_;
  std::map<std::string, RespawnGrant> grants_;
  std::map<std::string, Respawned> respawned_;
  std::set<std::string> unreadable_;  // run dirs whose relaunch record cannot be read
  std::vector<LaunchSpec> launches_;
  std::vector<Signal> signals_;
  std::vector<std::string> detached_;
  std::vector<std::vector<std::string>> detached_env_;
};

}  // namespace ktesio::testing
