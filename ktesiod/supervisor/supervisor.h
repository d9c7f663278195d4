#pragma once

// The supervisor: drives every Agent Instance through the lifecycle (lifecycle.h) with real
// processes (process::ProcessBackend), committing every transition — with its cause, to the
// store and the event log — before acting on it or reporting it.
//
// Thread-safety: engine thread only. Every method runs on the engine's io_context; completions
// are called there too. Concurrent commands on one instance are serialized by the state machine
// (a command that does not fit the current state is rejected); commands on different instances
// never wait for each other.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "boost/asio/io_context.hpp"
#include "ktesio/v1/common.pb.h"
#include "process/backend.h"
#include "spdlog/logger.h"
#include "store/store.h"
#include "supervisor/lifecycle.h"
#include "supervisor/restart_policy.h"
#include "time/clock.h"

namespace ktesio::daemon::supervisor {

// Per-instance settings the supervisor needs (from the layered config).
struct InstanceSettings {
  RestartSettings restart;
  uint64_t log_max_bytes = 10 * 1024 * 1024;
  uint32_t log_keep = 3;
  bool autostart = false;
};

// What a start delivers into the agent beyond its start template.
struct Delivery {
  std::vector<std::pair<std::string, std::string>> env;  // added after the template env
  std::vector<std::string> extra_args;                   // appended after the template args
  std::vector<std::string> notices;
};

struct Hooks {
  // Settings for an instance; defaults when unset.
  std::function<InstanceSettings(const store::InstanceRow&)> settings;
  // Renders config delivery before a launch; an error refuses the start with the state
  // unchanged. Unset = nothing to deliver.
  std::function<absl::StatusOr<Delivery>(const store::InstanceRow&, const v1::AdapterSnapshot&)>
      deliver;
  // Called after every committed transition (events, metering hooks).
  std::function<void(const store::InstanceRow&, State from, State to)> on_transition;
  // Reports (or, with "", clears) a problem keeping the store from the truth for an instance,
  // e.g. an exit whose commit keeps failing; the daemon shows it until it is resolved.
  std::function<void(const std::string& instance, const std::string& problem)> problem;
  // Whether `deliver` would succeed now, without writing or opening anything: a restart asks
  // before it stops a running agent, so a delivery that would be refused leaves it running.
  // Unset = nothing to check.
  std::function<absl::Status(const store::InstanceRow&, const v1::AdapterSnapshot&)> deliverable;
};

// The longest graceful stop window a command may ask for (ktctl's --timeout and ktesiod.toml's
// stop_timeout_secs have the same bound).
inline constexpr uint32_t kMaxStopWindowSeconds = 86400;

// INVALID_ARGUMENT/INVALID_ARGUMENT when `timeout_seconds` exceeds kMaxStopWindowSeconds.
absl::Status CheckStopWindow(std::optional<uint32_t> timeout_seconds);

// The outcome of a command: OK (the instance reached its target state, or `failed` for a start
// whose launch failed) plus notices for the operator.
using Done = std::function<void(absl::Status status, std::vector<std::string> notices)>;

// The lifecycle state of `row` (a row with an unknown state string reads as registered: the
// store's CHECK constraint admits only the seven names).
inline State RowState(const store::InstanceRow& row) {
  return ParseState(row.state).value_or(State::kRegistered);
}

// The registration snapshot of `row`. Errors: INTERNAL/STORE_ERROR naming the instance when
// the stored bytes do not parse (a damaged store; `ktesiod --check` tells).
absl::StatusOr<v1::AdapterSnapshot> SnapshotOf(const store::InstanceRow& row);

// A run begun or ended together with a transition, in the transition's own transaction.
struct RunChange {
  enum class Kind { kNone, kBegin, kEnd } kind = Kind::kNone;
  int64_t at_ms = 0;
};

class Supervisor {
 public:
  // `io` runs the stdin writes; every timestamp and timer comes from `clock`.
  Supervisor(boost::asio::io_context& io, store::Store& store, process::ProcessBackend& backend,
             time::Clock& clock, std::shared_ptr<spdlog::logger> logger, Hooks hooks);
  ~Supervisor();

  // Commands. Errors (via done): NOT_FOUND, INVALID_TRANSITION, CAPABILITY_UNSUPPORTED,
  // DELIVERY_FAILED (delivery refused), STOP_NOT_CONFIRMED, STORE_ERROR.
  void Start(const std::string& name, Done done);
  void Stop(const std::string& name, std::optional<uint32_t> timeout_seconds, Done done);
  void Restart(const std::string& name, std::optional<uint32_t> timeout_seconds, Done done);
  void Pause(const std::string& name, Done done);
  void Resume(const std::string& name, Done done);
  // What a send did: the bytes written, and notices (a best-effort channel says it is one).
  struct Sent {
    uint64_t bytes = 0;
    std::vector<std::string> notices;
  };
  // Writes one line to the agent's stdin, bounded at 5 s. Errors: INVALID_STATE (not running),
  // CAPABILITY_UNSUPPORTED, TIMED_OUT, IO_ERROR.
  void SendInput(const std::string& name, const std::string& text,
                 std::function<void(absl::StatusOr<Sent>)> done);

  // A budget breach: `pause` freezes per the declared level (an adapter that cannot pause on
  // this OS is stopped instead: spend must end), `stop` stops with the default window. Only a
  // running (or, for stop, paused) instance is acted on. `cause` is the transition cause.
  void BudgetAction(const std::string& name, bool stop, const std::string& cause);

  // At daemon start: makes memory agree with the store and the OS (re-adopt live agents, apply
  // exits that happened while the daemon was down, fail what vanished), then autostarts.
  void Reconcile();

  // The graceful stop window when a command names none (ktesiod.toml `stop_timeout_secs`), also
  // used by budget-breach stops.
  void set_default_stop_seconds(uint32_t seconds) { default_stop_seconds_ = seconds; }
  uint32_t default_stop_seconds() const { return default_stop_seconds_; }

  // True when an automatic restart of `name` is scheduled (its backoff timer is running).
  bool RestartPending(const std::string& name) const;

  // Calls `done`, always from the event loop (so it may remove the instance), once `name` is no
  // longer `starting` or `stopping`: when the start or stop under way ends (OK however it ends),
  // soon in any other state. Errors: STOP_NOT_CONFIRMED for a stop SIGKILL could not confirm
  // (at once when one already ended so), STORE_ERROR while an end of run is unrecorded,
  // INVALID_STATE when the transition outlives its longest possible course (60 s for a start,
  // the stop window + 15 s for a stop): nothing is under way to end it.
  void AwaitSettled(const std::string& name, Done done);
  // Answers every waiter of a start or stop under way with UNAVAILABLE (the daemon is shutting
  // down; the transition goes on and the next daemon re-adopts it), and from then on every new
  // start, stop or wait at once, so that nothing keeps the API server's shutdown waiting.
  void AnswerWaitersAtShutdown();

  // Forgets an instance being removed (it must be terminal).
  void Forget(const std::string& name);

  // The configuration `name` would be started with changed ("" = every instance's may have,
  // e.g. a secret): a relaunch in place would start the agent with what it was given before,
  // so the shim's grant is taken back until the daemon starts the agent itself.
  void ConfigChanged(const std::string& name);

  // Where an instance's shim keeps its files.
  static std::string RunDir(const std::string& home) { return home + "/run"; }

 private:
  struct Runtime;
  Runtime& RuntimeFor(const store::InstanceRow& row);
  absl::StatusOr<store::InstanceRow> Load(const std::string& name);
  // Loads `name` for an operator `command`: NOT_FOUND, STORE_ERROR while an exit is unrecorded,
  // INVALID_TRANSITION when the command does not fit the state.
  absl::StatusOr<store::InstanceRow> Admit(const std::string& name, Command command);
  // Runs a stop/pause/resume template detached in the agent's home, with the safe base
  // environment plus the template's own; it is killed with its process group when it still runs
  // after `limit` (a stop's: its window plus the 5 s the kill may take to confirm). Errors: the
  // backend's.
  absl::Status RunTemplate(const v1::OpTemplate& op, const store::InstanceRow& row,
                           std::chrono::milliseconds limit = kTemplateLimit);
  static constexpr std::chrono::milliseconds kTemplateLimit{30000};
  // A guaranteed pause or resume: commits `to` with `cause`, then signals the whole group.
  void CommitAndSignal(store::InstanceRow& row, State to, const std::string& cause, int signal,
                       const Done& done);
  absl::Status Commit(store::InstanceRow& row, State to, const std::string& cause,
                      RunChange run = {});
  // The end of a run already happened (an exit, a failed launch): its transition and the run's
  // end must reach the store. The first attempt's outcome goes to `answer` (a waiting command,
  // may be null); a failed commit is retried with backoff (the instance refuses commands and
  // the problem is reported meanwhile), and `recorded` runs once it is committed.
  void RecordEnd(store::InstanceRow row, State to, std::string cause, int64_t ended_at,
                 const std::function<void(const absl::Status&)>& answer,
                 std::function<void(store::InstanceRow&)> recorded);
  // STORE_ERROR while an end of run of `row` is not recorded yet; OK otherwise.
  absl::Status RefuseWhileUnrecorded(const store::InstanceRow& row);
  void Launch(store::InstanceRow row, bool automatic);
  void OnLaunched(const std::string& name, uint64_t generation,
                  absl::StatusOr<process::Launched> launched);
  void OnReady(const std::string& name, uint64_t generation);
  // The runtime of `name` (and its row, into `row`) while launch `generation` is still the one
  // starting; nullptr once a later command or an exit has superseded it.
  Runtime* StillStarting(const std::string& name, uint64_t generation, store::InstanceRow& row);
  void OnExit(const std::string& name, uint64_t generation);
  // `found_late`: the exit happened while no daemon ran (found by a reconciliation), so the run's
  // length and the backoff count from its record's time rather than from now.
  void ApplyExit(store::InstanceRow& row, const std::optional<process::ExitRecord>& exit, bool lost,
                 const std::string& lost_detail, bool found_late = false);
  void ScheduleRestart(store::InstanceRow& row, const RestartDecision& decision);
  // At reconciliation: schedules the restart an instance at rest is still owed under its
  // restart policy (OwedRestartDelay), for the time left of its backoff.
  void ResumeOwedRestart(store::InstanceRow& row);
  void FireRestart(const std::string& name, uint64_t generation, int64_t delay_ms);
  void BeginStop(store::InstanceRow& row, uint32_t window_seconds);
  void Escalate(const std::string& name, uint64_t generation);
  void ConfirmTimeout(const std::string& name, uint64_t generation);
  // The row of `name` while its stop of `generation` is still under way (a stop timer may fire
  // after the stop ended or another began); nullopt otherwise.
  std::optional<store::InstanceRow> PendingStop(const std::string& name, uint64_t generation);
  // Answers every waiter in `waiters` (emptied first). `notices` is taken by value: it usually
  // names the Runtime's own list, and a waiter may end that Runtime (a removal).
  void Finish(std::vector<Done>& waiters, const absl::Status& status,
              std::vector<std::string> notices = {});
  void EngineLine(const store::InstanceRow& row, const std::string& text);
  InstanceSettings SettingsFor(const store::InstanceRow& row);
  void Adopt(store::InstanceRow& row, const std::string& boot_id);
  // Respawn in place (supervisor_respawn.cc, docs/shim.md): the grant a running run leaves its
  // shim, taking it back, and recording a relaunch the shim made.
  void GrantRespawn(const store::InstanceRow& row);
  void WithdrawRespawn(const store::InstanceRow& row);
  void WatchShim(const process::ProcessIdentity& shim, const std::string& name,
                 const std::string& home, uint64_t generation);
  void OnRespawned(const std::string& name, const std::string& home, uint64_t generation);
  // Records the relaunch the shim recorded in the run dir and the daemon has not yet, if any, and
  // then reloads `row` (the stored row after it) — except for a relaunch met as the instance left
  // running, which is killed and which `row` then names as ApplyRespawn left it. False when there
  // was none (or its record was unreadable: logged). Errors: the store's, when the row could not
  // be reloaded (the caller stops there; the next reconciliation starts over from the store).
  absl::StatusOr<bool> TakeRespawned(store::InstanceRow& row);
  // The record in `home`'s run dir, consumed; nullopt when there is none or it is unreadable.
  std::optional<process::Respawned> ReadRespawned(const std::string& name, const std::string& home);
  // True when the relaunch was recorded as a restart; false when it came as the instance left
  // running and was killed (`row` then holds the relaunched pid, whether or not that was stored).
  bool ApplyRespawn(store::InstanceRow& row, const process::Respawned& respawned);
  void BeginRespawnedRun(store::InstanceRow& row, const process::Respawned& respawned);

  boost::asio::io_context& io_;
  store::Store& store_;
  process::ProcessBackend& backend_;
  time::Clock& clock_;
  std::shared_ptr<spdlog::logger> log_;
  Hooks hooks_;
  std::map<std::string, std::unique_ptr<Runtime>> runtimes_;
  uint32_t default_stop_seconds_ = 30;
  // Set by AnswerWaitersAtShutdown: every later start, stop or wait is answered SHUTTING_DOWN at
  // once (the API server waits for every call it has to finish).
  bool shutting_down_ = false;
  absl::Status ShuttingDown() const;
};

// The safe base of the daemon's environment every agent starts from (PATH, HOME, LANG, TZ, ...).
std::map<std::string, std::string> SafeBaseEnvironment();

// The kernel boot id (/proc/sys/kernel/random/boot_id), "" when unknown.
std::string CurrentBootId();

}  // namespace ktesio::daemon::supervisor
