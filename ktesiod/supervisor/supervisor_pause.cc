// The supervisor's freezing side: pause and resume by an operator, and budget-breach actions.

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "supervisor/internal.h"
#include "supervisor/runtime.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::supervisor {

namespace reason = contract::reason;
using internal::LevelHere;
using internal::QuoteDeclaration;
using internal::Supported;

void Supervisor::Pause(const std::string& name, Done done) {
  absl::StatusOr<store::InstanceRow> row = Admit(name, Command::kPause);
  if (!row.ok()) {
    done(row.status(), {});
    return;
  }
  absl::StatusOr<v1::AdapterSnapshot> snapshot = SnapshotOf(*row);
  if (!snapshot.ok()) {
    done(snapshot.status(), {});
    return;
  }
  const v1::SupportLevel level = LevelHere(snapshot->capabilities().pause());
  if (!Supported(level)) {
    done(contract::MakeError(absl::StatusCode::kFailedPrecondition, reason::kCapabilityUnsupported,
                             absl::StrCat("pause is unsupported on linux for '", name, "' (kind ",
                                          row->kind, "): ", QuoteDeclaration("pause", level))),
         {});
    return;
  }
  if (level == v1::SUPPORT_LEVEL_GUARANTEED) {
    CommitAndSignal(*row, State::kPaused, "paused", SIGSTOP, done);
    return;
  }
  std::vector<std::string> notices = {
      "pause is best-effort on linux for this adapter: the agent may not be fully frozen"};
  absl::Status status = Commit(*row, State::kPaused, "pause-best-effort");
  if (status.ok() && snapshot->pause().exec().empty()) {
    notices.push_back("no [lifecycle.pause] template is declared; nothing was sent to the agent");
  } else if (status.ok()) {
    if (absl::Status ran = RunTemplate(snapshot->pause(), *row); !ran.ok()) {
      notices.push_back(absl::StrCat("pause template failed: ", ran.message()));
    }
  }
  done(status, notices);
}

void Supervisor::CommitAndSignal(store::InstanceRow& row, State to, const std::string& cause,
                                 int signal, const Done& done) {
  const pid_t leader = static_cast<pid_t>(row.pid.value_or(0));
  absl::Status status = Commit(row, to, cause);
  if (status.ok()) {
    backend_.SignalGroup(leader, signal)
        .IgnoreError();  // a gone group: its exit arrives via the shim
  }
  done(status, {});
}

void Supervisor::Resume(const std::string& name, Done done) {
  absl::StatusOr<store::InstanceRow> row = Admit(name, Command::kResume);
  if (!row.ok()) {
    done(row.status(), {});
    return;
  }
  absl::StatusOr<v1::AdapterSnapshot> parsed = SnapshotOf(*row);
  if (!parsed.ok()) {
    // SIGCONT resumes a frozen group whatever its adapter says: resume the guaranteed way.
    log_->error("{}; resuming with SIGCONT", std::string(parsed.status().message()));
  }
  const v1::SupportLevel level =
      parsed.ok() ? LevelHere(parsed->capabilities().pause()) : v1::SUPPORT_LEVEL_GUARANTEED;
  if (level == v1::SUPPORT_LEVEL_GUARANTEED) {
    CommitAndSignal(*row, State::kRunning, "resumed", SIGCONT, done);
    return;
  }
  std::vector<std::string> notices = {"resume is best-effort on linux for this adapter"};
  absl::Status status = Commit(*row, State::kRunning, "resume-best-effort");
  if (status.ok() && !parsed->resume().exec().empty()) {
    if (absl::Status ran = RunTemplate(parsed->resume(), *row); !ran.ok()) {
      notices.push_back(absl::StrCat("resume template failed: ", ran.message()));
    }
  }
  // A paused instance may also have been frozen by a budget breach with a guaranteed level;
  // SIGCONT is harmless for a group that is not stopped.
  backend_.SignalGroup(static_cast<pid_t>(row->pid.value_or(0)), SIGCONT)
      .IgnoreError();  // a gone group: its exit arrives via the shim
  done(status, notices);
}

void Supervisor::BudgetAction(const std::string& name, bool stop, const std::string& cause) {
  absl::StatusOr<store::InstanceRow> row = Load(name);
  if (!row.ok()) {
    return;
  }
  const State state = RowState(*row);
  if (state == State::kStarting) {
    RuntimeFor(*row).pending_budget = std::make_pair(stop, cause);
    return;
  }
  if (!stop && state == State::kPaused) {
    return;  // already paused (e.g. a best-effort pause whose agent still reports usage)
  }
  absl::StatusOr<v1::AdapterSnapshot> parsed = SnapshotOf(*row);
  if (!parsed.ok()) {
    // The budget is spent and the pause level unknown: stopping needs no capability.
    log_->error("{}; the budget action becomes a stop", std::string(parsed.status().message()));
    stop = true;
  }
  const v1::AdapterSnapshot snapshot = parsed.ok() ? *parsed : v1::AdapterSnapshot();
  const v1::SupportLevel level = LevelHere(snapshot.capabilities().pause());
  const pid_t leader = static_cast<pid_t>(row->pid.value_or(0));
  if (!stop && state == State::kRunning && Supported(level)) {
    if (!Commit(*row, State::kPaused,
                level == v1::SUPPORT_LEVEL_GUARANTEED ? cause : cause + " pause-best-effort")
             .ok()) {
      return;
    }
    if (level == v1::SUPPORT_LEVEL_GUARANTEED) {
      backend_.SignalGroup(leader, SIGSTOP)
          .IgnoreError();  // a gone group: its exit arrives via the shim
    } else if (!snapshot.pause().exec().empty()) {
      RunTemplate(snapshot.pause(), *row).IgnoreError();  // best effort: the level is best-effort
    }
    return;
  }
  if (state != State::kRunning && state != State::kPaused) {
    return;
  }
  if (!stop) {
    EngineLine(*row, "budget breach: pause is unsupported here, stopping instead");
  }
  if (!Commit(*row, State::kStopping, cause).ok()) {
    return;
  }
  Runtime& rt = RuntimeFor(*row);
  rt.stop_notices.clear();
  if (state == State::kPaused) {
    backend_.SignalGroup(leader, SIGCONT)
        .IgnoreError();  // a gone group: its exit arrives via the shim
  }
  BeginStop(*row, default_stop_seconds_);
}

}  // namespace ktesio::daemon::supervisor
