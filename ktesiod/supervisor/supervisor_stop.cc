// The supervisor's stopping side: a stop (the stop template or SIGTERM, then SIGKILL to the whole
// group when the window ends, then the confirmation bound) and a restart (a stop, then a start).

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "supervisor/internal.h"
#include "supervisor/runtime.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::supervisor {

namespace reason = contract::reason;

absl::Status CheckStopWindow(std::optional<uint32_t> timeout_seconds) {
  if (timeout_seconds.value_or(0) > kMaxStopWindowSeconds) {
    return contract::MakeError(
        absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
        absl::StrCat("a stop window of ", *timeout_seconds, " s is too long (at most ",
                     kMaxStopWindowSeconds, " s, one day)"));
  }
  return absl::OkStatus();
}

void Supervisor::Stop(const std::string& name, std::optional<uint32_t> timeout_seconds, Done done) {
  if (shutting_down_) {
    done(ShuttingDown(), {});
    return;
  }
  // Before anything: a window of 136 years would leave the instance `stopping` for good.
  if (absl::Status status = CheckStopWindow(timeout_seconds); !status.ok()) {
    done(status, {});
    return;
  }
  absl::StatusOr<store::InstanceRow> row = Load(name);
  if (!row.ok()) {
    done(row.status(), {});
    return;
  }
  Runtime& rt = RuntimeFor(*row);
  const State state = RowState(*row);
  if (rt.restart_pending && (state == State::kFailed || state == State::kStopped)) {
    rt.restart_pending = false;
    rt.restart_timer->Cancel();
    // Kept: a daemon restarted later must not find the restart owed (OwedRestartDelay).
    row->crash_streak = 0;
    if (absl::Status status = store_.UpdateInstance(*row); !status.ok()) {
      log_->warn("cancelled restart not recorded instance={} error={}", name,
                 std::string(status.message()));
    }
    EngineLine(*row, "pending restart cancelled by an operator stop");
    done(absl::OkStatus(), {"the pending automatic restart was cancelled"});
    return;
  }
  if (absl::Status status = RefuseWhileUnrecorded(*row); !status.ok()) {
    done(status, {});
    return;
  }
  if (absl::Status status = CheckCommand(state, Command::kStop); !status.ok()) {
    done(status, {});
    return;
  }
  if (absl::Status status = Commit(*row, State::kStopping, "stop-requested"); !status.ok()) {
    done(status, {});
    return;
  }
  rt.stop_waiters.push_back(std::move(done));
  rt.stop_notices.clear();
  if (state == State::kPaused) {
    // A frozen group cannot act on SIGTERM; thaw it first.
    backend_.SignalGroup(static_cast<pid_t>(row->pid.value_or(0)), SIGCONT)
        .IgnoreError();  // a gone group: its exit arrives via the shim
  }
  BeginStop(*row, timeout_seconds.value_or(default_stop_seconds_));
}

void Supervisor::BeginStop(store::InstanceRow& row, uint32_t window_seconds) {
  RuntimeFor(row).stop_unconfirmed = false;
  // Before any signal: the agent's exit must end the run, not be answered by a relaunch; and a
  // relaunch already made (its record not yet seen) is dealt with, so no signal goes to a stale
  // pid.
  WithdrawRespawn(row);
  // Ignored: a relaunch met here is killed and `row` names it without a reload.
  TakeRespawned(row).IgnoreError();
  Runtime& rt = RuntimeFor(row);
  rt.kill_sent = false;
  rt.stop_window_s = window_seconds;
  const uint64_t generation = rt.generation;
  const std::string name = row.name;
  const pid_t leader = static_cast<pid_t>(row.pid.value_or(0));
  if (window_seconds == 0) {
    Escalate(name, generation);
    return;
  }
  absl::StatusOr<v1::AdapterSnapshot> parsed = SnapshotOf(row);
  if (!parsed.ok()) {
    // Without the adapter's stop template, stop the plain way: SIGTERM to the group.
    log_->error("{}; stopping with SIGTERM", std::string(parsed.status().message()));
  }
  const v1::AdapterSnapshot snapshot = parsed.ok() ? *parsed : v1::AdapterSnapshot();
  bool signalled = false;
  if (!snapshot.stop().exec().empty()) {
    absl::Status status =
        RunTemplate(snapshot.stop(), row, std::chrono::seconds(window_seconds + 5));
    if (status.ok()) {
      EngineLine(row, absl::StrCat("stop template started: ", snapshot.stop().exec()));
      signalled = true;
    } else {
      rt.stop_notices.push_back(
          absl::StrCat("stop template failed (", status.message(), "); sent SIGTERM instead"));
    }
  }
  if (!signalled) {
    backend_.SignalGroup(leader, SIGTERM)
        .IgnoreError();  // a gone group: its exit arrives via the shim
  }
  rt.stop_timer->Arm(std::chrono::seconds(window_seconds),
                     [this, name, generation] { Escalate(name, generation); });
}

std::optional<store::InstanceRow> Supervisor::PendingStop(const std::string& name,
                                                          uint64_t generation) {
  absl::StatusOr<store::InstanceRow> row = Load(name);
  if (!row.ok() || RuntimeFor(*row).generation != generation ||
      RowState(*row) != State::kStopping) {
    return std::nullopt;
  }
  return *std::move(row);
}

void Supervisor::Escalate(const std::string& name, uint64_t generation) {
  std::optional<store::InstanceRow> row = PendingStop(name, generation);
  if (!row.has_value()) {
    return;
  }
  WithdrawRespawn(*row);  // also when a stop begins here (adopted mid-stop)
  Runtime& rt = RuntimeFor(*row);
  rt.kill_sent = true;
  rt.stop_unconfirmed = false;
  backend_.SignalGroup(static_cast<pid_t>(row->pid.value_or(0)), SIGKILL)
      .IgnoreError();  // a gone group: its exit arrives via the shim
  EngineLine(*row, "stop escalated: SIGKILL to the whole process group");
  rt.confirm_timer->Arm(std::chrono::seconds(5),
                        [this, name, generation] { ConfirmTimeout(name, generation); });
}

void Supervisor::ConfirmTimeout(const std::string& name, uint64_t generation) {
  std::optional<store::InstanceRow> row = PendingStop(name, generation);
  if (!row.has_value()) {
    return;
  }
  RuntimeFor(*row).stop_unconfirmed = true;
  Finish(RuntimeFor(*row).stop_waiters,
         contract::MakeError(
             absl::StatusCode::kDeadlineExceeded, reason::kStopNotConfirmed,
             absl::StrCat("the process group of '", name, "' (pgid ", row->pid.value_or(0),
                          ") did not exit within 5 s after SIGKILL; it stays 'stopping'")));
}

void Supervisor::Restart(const std::string& name, std::optional<uint32_t> timeout_seconds,
                         Done done) {
  if (absl::Status status = CheckStopWindow(timeout_seconds); !status.ok()) {
    done(status, {});
    return;
  }
  absl::StatusOr<store::InstanceRow> row = Load(name);
  if (!row.ok()) {
    done(row.status(), {});
    return;
  }
  const State state = RowState(*row);
  if (state != State::kRunning && state != State::kPaused) {
    Start(name, std::move(done));
    return;
  }
  // The start after the stop renders the delivery; one that would be refused (a secret gone, a
  // hand-edited config file the daemon refuses) must not cost the running agent its run.
  if (hooks_.deliverable) {
    absl::StatusOr<v1::AdapterSnapshot> snapshot = SnapshotOf(*row);
    const absl::Status deliverable =
        snapshot.ok() ? hooks_.deliverable(*row, *snapshot) : snapshot.status();
    if (!deliverable.ok()) {
      done(contract::MakeError(deliverable.code(), contract::ErrorReason(deliverable),
                               absl::StrCat(deliverable.message(), " (restart refused: '", name,
                                            "' keeps running)")),
           {});
      return;
    }
  }
  Stop(name, timeout_seconds,
       [this, name, done = std::move(done)](absl::Status status, std::vector<std::string> notes) {
         if (!status.ok()) {
           done(status, notes);
           return;
         }
         Start(name, [done, notes](absl::Status start_status, std::vector<std::string> more) {
           more.insert(more.begin(), notes.begin(), notes.end());
           done(start_status, more);
         });
       });
}

}  // namespace ktesio::daemon::supervisor
