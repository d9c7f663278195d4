// Respawn in place (docs/shim.md): a running run's shim holds a grant for the exits the restart
// policy would answer with an immediate restart, relaunches the agent itself when one happens,
// and the supervisor records the restart behind it — the same transitions, events and counters
// as a restart it makes itself.

#include <signal.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/status_macros.h"
#include "supervisor/internal.h"
#include "supervisor/runtime.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::supervisor {

void Supervisor::GrantRespawn(const store::InstanceRow& row) {
  const Runtime& rt = RuntimeFor(row);
  if (!rt.respawn_watched || rt.config_changed) {
    return;
  }
  absl::StatusOr<v1::AdapterSnapshot> snapshot = SnapshotOf(row);
  // An engine-observed agent's restart goes through the daemon: its metering proxy is reopened
  // for the new run (and may move to another port), which a relaunch in place would skip.
  if (!snapshot.ok() || snapshot->metering_source() == v1::METERING_SOURCE_ENGINE_OBSERVED) {
    return;
  }
  const RestartSettings settings = SettingsFor(row).restart;
  process::RespawnGrant grant;
  // DecideRestart restarts at once exactly when the streak after this exit is 1: the streak is
  // 0 now, or the run outlasts reset_after_ms (which ends the streak).
  if (settings.policy != RestartPolicyKind::kNever && settings.max_consecutive > 1) {
    grant.crash_after_ms =
        row.crash_streak == 0 ? 0 : std::max<int64_t>(settings.reset_after_ms, 0);
  }
  // A clean exit restarts (policy always) at once when the run outlasted the respawn floor.
  if (settings.policy == RestartPolicyKind::kAlways) {
    grant.clean_after_ms = kRespawnFloorMs;
  }
  if (grant.crash_after_ms < 0 && grant.clean_after_ms < 0) {
    return;
  }
  if (snapshot->metering_source() == v1::METERING_SOURCE_SELF_REPORTED) {
    grant.usage_file = absl::StrCat(RunDir(row.home), "/usage-", row.current_run + 1, ".log");
  }
  if (absl::Status status = backend_.GrantRespawn(RunDir(row.home), grant); !status.ok()) {
    // Only slower: the next restart goes through the daemon.
    log_->warn("respawn grant not written instance={} error={}", row.name,
               std::string(status.message()));
  }
}

void Supervisor::WithdrawRespawn(const store::InstanceRow& row) {
  backend_.WithdrawRespawn(RunDir(row.home));
}

void Supervisor::ConfigChanged(const std::string& name) {
  auto changed = [this](const store::InstanceRow& row) {
    RuntimeFor(row).config_changed = true;  // also while starting: no grant at running
    WithdrawRespawn(row);
  };
  if (!name.empty()) {
    if (absl::StatusOr<store::InstanceRow> row = Load(name); row.ok()) {
      changed(*row);
    }
    return;
  }
  absl::StatusOr<std::vector<store::InstanceRow>> rows = store_.ListInstances();
  if (rows.ok()) {
    for (const store::InstanceRow& row : *rows) {
      if (IsLive(RowState(row))) {
        changed(row);
      }
    }
  }
}

void Supervisor::WatchShim(const process::ProcessIdentity& shim, const std::string& name,
                           const std::string& home, uint64_t generation) {
  const bool watched = backend_.WatchRespawn(
      shim, RunDir(home), [this, name, home, generation] { OnRespawned(name, home, generation); });
  if (absl::StatusOr<store::InstanceRow> row = Load(name); row.ok()) {
    RuntimeFor(*row).respawn_watched = watched;
  }
}

void Supervisor::OnRespawned(const std::string& name, const std::string& home,
                             uint64_t generation) {
  // Called for each write of the record's name (and for every watch when inotify lost events):
  // look for the record before touching the store.
  std::optional<process::Respawned> respawned = ReadRespawned(name, home);
  if (!respawned.has_value()) {
    return;
  }
  absl::StatusOr<store::InstanceRow> row = Load(name);
  if (!row.ok() || RuntimeFor(*row).generation != generation) {
    // Not expected: the watch ends with the shim it belongs to.
    log_->warn("relaunch record of a superseded run ignored instance={} pid={}", name,
               respawned->agent.pid);
    return;
  }
  ApplyRespawn(*row, *respawned);  // the row is reloaded by whatever acts on it next
}

std::optional<process::Respawned> Supervisor::ReadRespawned(const std::string& name,
                                                            const std::string& home) {
  absl::StatusOr<std::optional<process::Respawned>> taken = backend_.TakeRespawned(RunDir(home));
  if (!taken.ok()) {
    // Only the shim writes it, whole: a damaged one is left unapplied (the relaunched agent's
    // next exit ends the run it belongs to), but never silently.
    log_->error("relaunch record ignored instance={} error={}", name,
                std::string(taken.status().message()));
    return std::nullopt;
  }
  return *std::move(taken);
}

absl::StatusOr<bool> Supervisor::TakeRespawned(store::InstanceRow& row) {
  std::optional<process::Respawned> respawned = ReadRespawned(row.name, row.home);
  if (!respawned.has_value()) {
    return false;
  }
  if (!ApplyRespawn(row, *respawned)) {
    // Killed mid-stop: `row` names the relaunched agent even if the store did not take it, so
    // the stop never signals the old (possibly reused) pid.
    return true;
  }
  // A recorded restart commits copies of the row (RecordEnd retries with its own): read it back.
  KT_ASSIGN_OR_RETURN(row, Load(row.name));
  return true;
}

bool Supervisor::ApplyRespawn(store::InstanceRow& row, const process::Respawned& respawned) {
  Runtime& rt = RuntimeFor(row);
  const State state = RowState(row);
  const std::string description = process::DescribeExit(respawned.exit);
  if (state != State::kRunning && state != State::kPaused) {
    // The grant was taken back too late: a stop (or another command) began as the agent exited.
    // The relaunched agent does not run on; the shim's exit then ends what began.
    EngineLine(row, absl::StrCat("agent exited (", description, ") and was relaunched by its ",
                                 "shim as the instance left running; the relaunch is killed"));
    row.last_exit = description;
    row.pid = respawned.agent.pid;
    row.pid_start_time = respawned.agent.start_time;
    if (absl::Status status = store_.UpdateInstance(row); !status.ok()) {
      log_->warn("relaunch not recorded instance={} error={}", row.name,
                 std::string(status.message()));
    }
    backend_.SignalGroup(respawned.agent.pid, SIGKILL).IgnoreError();  // gone: nothing to do
    return false;
  }
  const bool clean =
      respawned.exit.kind == process::ExitRecord::Kind::kExited && respawned.exit.value == 0;
  // The shim's clock measured the run the grant was judged on; it is the one that counts.
  const RestartDecision decision =
      DecideRestart(SettingsFor(row).restart, {clean, respawned.run_ms, row.crash_streak});
  rt.ready_timer->Cancel();
  rt.confirm_timer->Cancel();
  row.crash_streak = decision.crash_streak;
  row.last_exit = description;
  const std::string cause = clean ? "exited" : absl::StrCat("crashed{", description, "}");
  // The run ended when the shim relaunched the agent, however late the record is read.
  const int64_t now = clock_.NowUnixMs();
  const int64_t ended_at =
      respawned.started_at_ms > 0 ? std::min(respawned.started_at_ms, now) : now;
  RecordEnd(row, clean ? State::kStopped : State::kFailed, cause, ended_at, nullptr,
            [this, respawned](store::InstanceRow& committed) {
              BeginRespawnedRun(committed, respawned);
            });
  return true;
}

void Supervisor::BeginRespawnedRun(store::InstanceRow& row, const process::Respawned& respawned) {
  Runtime& rt = RuntimeFor(row);
  row.restart_count += 1;
  row.restarts_total += 1;
  row.current_run += 1;
  row.pid = respawned.agent.pid;
  row.pid_start_time = respawned.agent.start_time;
  const int64_t now = clock_.NowUnixMs();
  row.started_at_ms = respawned.started_at_ms > 0 ? std::min(respawned.started_at_ms, now) : now;
  rt.restart_pending = false;
  rt.restart_delay_ms = 0;
  rt.automatic_start = true;
  rt.pending_budget.reset();
  rt.start_notices.clear();
  const std::string cause = absl::StrCat("restarted{count=", row.restart_count, ",waited_ms=0}");
  if (absl::Status status =
          Commit(row, State::kStarting, cause, {RunChange::Kind::kBegin, *row.started_at_ms});
      !status.ok()) {
    // The agent runs; the store refuses. Stop it rather than leave a run nobody recorded.
    backend_.SignalGroup(respawned.agent.pid, SIGKILL).IgnoreError();
    return;
  }
  EngineLine(row, absl::StrCat("relaunched by its shim (agent pid ", respawned.agent.pid, ")"));
  const uint64_t generation = rt.generation;
  const std::string name = row.name;
  const auto waited = std::chrono::milliseconds(now - *row.started_at_ms);
  if (waited >= internal::kReadinessWindow) {
    // Recorded late (the daemon was down): the relaunched run is past its readiness window, unless
    // its exit record says it ended within the window. Then it stays `starting`, and the exit,
    // applied next by the reconciliation, fails it as the start it was (launch-error).
    std::optional<process::ExitRecord> exit = backend_.ReadExit(RunDir(row.home));
    if (exit.has_value() && exit->at_ms > 0 &&
        exit->at_ms - *row.started_at_ms < internal::kReadinessWindow.count()) {
      return;
    }
    OnReady(name, generation);
    return;
  }
  rt.ready_timer->Arm(internal::kReadinessWindow - waited,
                      [this, name, generation] { OnReady(name, generation); });
}

}  // namespace ktesio::daemon::supervisor
