// The supervisor's event side: exits, restarts, reconciliation at start-up, and stdin.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "boost/asio/posix/stream_descriptor.hpp"
#include "boost/asio/write.hpp"
#include "fs/fs.h"
#include "ktesio/contract/error.h"
#include "supervisor/runtime.h"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::supervisor {

namespace reason = contract::reason;
namespace asio = boost::asio;

void Supervisor::OnExit(const std::string& name, uint64_t generation) {
  absl::StatusOr<store::InstanceRow> row = Load(name);
  if (!row.ok()) {
    return;
  }
  if (RuntimeFor(*row).generation != generation) {
    return;
  }
  // A relaunch the shim recorded but the daemon has not yet: it happened first.
  if (!TakeRespawned(*row).ok()) {
    return;
  }
  std::optional<process::ExitRecord> exit = backend_.ReadExit(RunDir(row->home));
  std::string detail = "ktesio-shim ended without recording an exit";
  if (!exit.has_value()) {
    // The shim's own stderr says why, when it could say anything at all.
    // The run dir is in the agent's home: bounded and non-blocking (a FIFO would hang us).
    std::string shim_log =
        fs::ReadRegularFile(RunDir(row->home) + "/shim.log", 1 << 20).value_or("");
    while (!shim_log.empty() && shim_log.back() == '\n') {
      shim_log.pop_back();
    }
    if (size_t nl = shim_log.rfind('\n'); nl != std::string::npos) {
      shim_log = shim_log.substr(nl + 1);
    }
    if (!shim_log.empty()) {
      absl::StrAppend(&detail, ": ", shim_log.substr(0, 300));
    }
  }
  ApplyExit(*row, exit, !exit.has_value(), detail);
}

void Supervisor::ApplyExit(store::InstanceRow& row, const std::optional<process::ExitRecord>& exit,
                           bool lost, const std::string& lost_detail, bool found_late) {
  Runtime& rt = RuntimeFor(row);
  const State state = RowState(row);
  const std::string description = exit.has_value() ? process::DescribeExit(*exit) : lost_detail;
  const pid_t leader = static_cast<pid_t>(row.pid.value_or(0));
  const int64_t now = clock_.NowUnixMs();
  // An exit found by a later daemon ended when its shim recorded it, not when it was found: the
  // run's length (the crash streak's reset) and the backoff count from then. (A watched exit is
  // timed now: the record's coarse file time would only shave a few ms off the backoff.)
  const int64_t ended =
      found_late && exit.has_value() && exit->at_ms > 0 ? std::min(exit->at_ms, now) : now;
  const int64_t run_ms =
      row.started_at_ms.has_value() ? std::max<int64_t>(0, ended - *row.started_at_ms) : 0;
  rt.generation += 1;  // invalidates the readiness, stop and confirm timers of this run
  rt.ready_timer->Cancel();
  rt.stop_timer->Cancel();
  rt.confirm_timer->Cancel();
  row.last_exit = description;
  row.pid.reset();
  row.pid_start_time.reset();
  row.shim_pid.reset();
  row.shim_start_time.reset();
  // Whatever the agent left in its group goes with it (the shim does this too; this covers a
  // shim that vanished).
  if (leader > 1) {
    backend_.SignalGroup(leader, SIGKILL).IgnoreError();  // usually nothing is left to signal
  }

  if (state == State::kStopping) {
    const std::string cause =
        rt.kill_sent ? absl::StrCat("stop-forced{SIGKILL after ", rt.stop_window_s, " s}")
                     : "stop-graceful";
    RecordEnd(
        row, State::kStopped, cause, now,
        [&](const absl::Status& status) { Finish(rt.stop_waiters, status, rt.stop_notices); },
        nullptr);
    return;
  }
  if (state == State::kStarting) {
    absl::StatusOr<v1::AdapterSnapshot> snapshot = SnapshotOf(row);  // only names the program
    const std::string cause =
        lost ? absl::StrCat("launch-error{", description, "}")
             : absl::StrCat("launch-error{'", snapshot.ok() ? snapshot->start().exec() : "?",
                            "' exited within the readiness window: ", description, "}");
    std::optional<RestartDecision> decision;
    if (rt.automatic_start) {
      decision = DecideRestart(SettingsFor(row).restart, {false, run_ms, row.crash_streak});
      row.crash_streak = decision->crash_streak;  // committed with the transition
    }
    RecordEnd(
        row, State::kFailed, cause, now,
        [&](const absl::Status& status) { Finish(rt.start_waiters, status, rt.start_notices); },
        [this, decision](store::InstanceRow& committed) {
          if (decision.has_value()) {
            ScheduleRestart(committed, *decision);
          }
        });
    return;
  }
  if (state != State::kRunning && state != State::kPaused) {
    log_->warn("exit ignored instance={} state={} exit=\"{}\"", row.name, row.state, description);
    // Ignored: only clears a stale spawn record of an instance at rest; the next reconcile
    // finds the same dead processes and clears it again.
    store_.UpdateInstance(row).IgnoreError();
    return;
  }
  const bool clean = !lost && exit->kind == process::ExitRecord::Kind::kExited && exit->value == 0;
  const InstanceSettings settings = SettingsFor(row);
  RestartDecision decision = DecideRestart(settings.restart, {clean, run_ms, row.crash_streak});
  // A crash the policy does not restart (`never`) keeps no streak: a failed row with a streak is
  // one whose restart was decided, which a later daemon then owes (ResumeOwedRestart).
  row.crash_streak = decision.restart || decision.crash_loop ? decision.crash_streak : 0;
  decision.delay_ms = std::max<int64_t>(0, decision.delay_ms - (now - ended));  // already waited
  std::string cause;
  State to = State::kFailed;
  if (clean) {
    to = State::kStopped;
    cause = "exited";
  } else if (decision.crash_loop) {
    cause = absl::StrCat("crash-loop{", decision.crash_streak,
                         " consecutive crashes, last: ", description, "}");
  } else if (lost) {
    cause = absl::StrCat("lost{", description, "}");
  } else {
    cause = absl::StrCat("crashed{", description, "}");
  }
  RecordEnd(row, to, cause, now, nullptr, [this, decision](store::InstanceRow& committed) {
    ScheduleRestart(committed, decision);
  });
}

void Supervisor::ScheduleRestart(store::InstanceRow& row, const RestartDecision& decision) {
  if (!decision.restart) {
    return;
  }
  Runtime& rt = RuntimeFor(row);
  rt.restart_pending = true;
  rt.restart_delay_ms = decision.delay_ms;
  const uint64_t generation = rt.generation;
  const std::string name = row.name;
  const int64_t delay = decision.delay_ms;
  if (delay > 0) {
    EngineLine(row, absl::StrCat("restart scheduled in ", delay, " ms"));
  }
  rt.restart_timer->Arm(std::chrono::milliseconds(delay),
                        [this, name, generation, delay] { FireRestart(name, generation, delay); });
}

void Supervisor::FireRestart(const std::string& name, uint64_t generation, int64_t delay_ms) {
  absl::StatusOr<store::InstanceRow> row = Load(name);
  if (!row.ok()) {
    return;
  }
  Runtime& rt = RuntimeFor(*row);
  if (!rt.restart_pending || rt.generation != generation ||
      (RowState(*row) != State::kFailed && RowState(*row) != State::kStopped)) {
    return;
  }
  rt.restart_pending = false;
  rt.restart_delay_ms = delay_ms;
  row->restart_count += 1;
  row->restarts_total += 1;
  Launch(std::move(*row), true);
}

void Supervisor::Adopt(store::InstanceRow& row, const std::string& boot_id) {
  const State state = RowState(row);
  // A start under way that the restart policy made stays the policy's: its failure is decided as
  // an automatic start's would be (a backoff, not a plain launch-error).
  RuntimeFor(row).automatic_start =
      state == State::kStarting && row.cause.starts_with("restarted{");
  process::ProcessIdentity shim{static_cast<pid_t>(row.shim_pid.value_or(0)),
                                row.shim_start_time.value_or(0)};
  process::ProcessIdentity agent{static_cast<pid_t>(row.pid.value_or(0)),
                                 row.pid_start_time.value_or(0)};
  Runtime& rt = RuntimeFor(row);
  if (!row.boot_id.empty() && row.boot_id != boot_id) {
    // A relaunch recorded before the reboot still ended a run and began one (with its usage).
    if (!TakeRespawned(row).ok()) {
      return;
    }
    ApplyExit(row, std::nullopt, true, "the host rebooted since the agent was started");
    return;
  }
  if (shim.pid == 0 && state == State::kStarting) {
    // No spawn record: the previous daemon died while launching. A shim it spawned may be running
    // the agent anyway; take it on rather than leave it unsupervised (the start would otherwise
    // run a second copy).
    if (std::optional<process::Launched> left = backend_.UnconfirmedLaunch(RunDir(row.home))) {
      shim = left->shim;
      agent = left->agent;
      row.shim_pid = shim.pid;
      row.shim_start_time = shim.start_time;
      row.pid = agent.pid > 0 ? std::optional<int64_t>(agent.pid) : std::nullopt;
      row.pid_start_time = agent.pid > 0 ? std::optional<int64_t>(agent.start_time) : std::nullopt;
      row.boot_id = boot_id;
      // The run began when the shim started (never later than now): `started_at` and uptime.
      const int64_t now = clock_.NowUnixMs();
      row.started_at_ms = left->started_at_ms > 0 ? std::min(left->started_at_ms, now) : now;
      if (absl::Status status = store_.UpdateInstance(row); !status.ok()) {
        log_->error("spawn record of an unconfirmed launch not committed instance={} error={}",
                    row.name, std::string(status.message()));
      }
      log_->warn("unconfirmed launch found running instance={} shim={} pid={}", row.name, shim.pid,
                 agent.pid);
    }
  }
  if (shim.pid > 0 && backend_.IsAlive(shim)) {
    const uint64_t generation = ++rt.generation;
    const std::string name = row.name;
    if (!backend_.WatchExit(shim, [this, name, generation] { OnExit(name, generation); })) {
      ApplyExit(row, std::nullopt, true, "ktesio-shim could not be watched");
      return;
    }
    WatchShim(shim, name, row.home, generation);
    log_->info("re-adopted instance={} pid={} shim={}", row.name, agent.pid, shim.pid);
    EngineLine(row, absl::StrCat("re-adopted by a new ktesiod (agent pid ", agent.pid, ")"));
    // Its config may have been edited by hand while no daemon ran, which no grant reflects: the
    // next restart goes through the daemon (which delivers the config afresh and grants again).
    rt.config_changed = true;
    WithdrawRespawn(row);
    // A relaunch made while the daemon was down is recorded before anything acts on the pid.
    if (absl::StatusOr<bool> taken = TakeRespawned(row); !taken.ok() || *taken) {
      return;  // recorded as a restart (or, mid-stop, killed: its exit ends the stop)
    }
    if (state == State::kStarting) {
      // Ignored: the row stays `starting`, and the next reconciliation re-adopts it the same way.
      if (Commit(row, State::kRunning, "adapter-ready").ok()) {
        GrantRespawn(row);
      }
    } else if (state == State::kPaused || state == State::kRunning) {
      // A pause or resume commits its state before it signals the group: the old daemon may have
      // died in between. The stored state is the one the operator was answered with, so it is
      // made true again (both signals are no-ops on a group already so). A best-effort pause
      // froze nothing by signal and is left alone.
      const bool frozen = state == State::kPaused && !row.cause.ends_with("pause-best-effort");
      if (frozen || state == State::kRunning) {
        backend_.SignalGroup(agent.pid, frozen ? SIGSTOP : SIGCONT)
            .IgnoreError();  // a gone group: its exit follows
      }
    } else if (state == State::kStopping) {
      // The stop began at state_since_ms (its SIGTERM or template sent then, or about to be). An
      // explicit --timeout went with the old daemon: the agent gets what is left of the default
      // window, then the group's SIGKILL as in any stop.
      rt.kill_sent = false;
      rt.stop_window_s = default_stop_seconds_;
      // A paused agent being stopped was thawed by the old daemon, unless it died first.
      backend_.SignalGroup(agent.pid, SIGCONT).IgnoreError();  // a gone group: its exit follows
      // (Clamped: a wall clock stepped back must not postpone the SIGKILL past a whole window.)
      const int64_t window_ms = int64_t{default_stop_seconds_} * 1000;
      const int64_t left = std::min(row.state_since_ms + window_ms - clock_.NowUnixMs(), window_ms);
      if (left <= 0) {
        Escalate(row.name, generation);
      } else {
        EngineLine(row, absl::StrCat("stop re-adopted: SIGKILL in ", left,
                                     " ms unless the agent exits first"));
        rt.stop_timer->Arm(std::chrono::milliseconds(left),
                           [this, name, generation] { Escalate(name, generation); });
      }
    }
    return;
  }
  // The shim is gone: a relaunch it made before (while the daemon was down) comes first, and
  // its agent is the one that may be left.
  absl::StatusOr<bool> taken = TakeRespawned(row);
  if (!taken.ok()) {
    return;
  }
  if (*taken) {
    agent = {static_cast<pid_t>(row.pid.value_or(0)), row.pid_start_time.value_or(0)};
  }
  if (std::optional<process::ExitRecord> exit = backend_.ReadExit(RunDir(row.home))) {
    ApplyExit(row, exit, false, "", /*found_late=*/true);
    return;
  }
  if (agent.pid > 0 && backend_.IsAlive(agent)) {
    backend_.SignalGroup(agent.pid, SIGKILL).IgnoreError();  // best effort on an orphan
    ApplyExit(row, std::nullopt, true,
              "ktesio-shim vanished while the daemon was down; the uncaptured agent was killed");
    return;
  }
  ApplyExit(row, std::nullopt, true,
            "the agent and its ktesio-shim are gone without an exit record (killed or host "
            "reboot)");
}

void Supervisor::Reconcile() {
  absl::StatusOr<std::vector<store::InstanceRow>> rows = store_.ListInstances();
  if (!rows.ok()) {
    log_->error("reconcile failed error={}", std::string(rows.status().message()));
    return;
  }
  const std::string boot_id = CurrentBootId();
  for (store::InstanceRow& row : *rows) {
    const State state = RowState(row);
    if (IsLive(state)) {
      Adopt(row, boot_id);
    }
  }
  for (const store::InstanceRow& row : *rows) {
    absl::StatusOr<store::InstanceRow> fresh = Load(row.name);
    if (!fresh.ok()) {
      continue;
    }
    const State state = RowState(*fresh);
    if (IsTerminal(state) && !RuntimeFor(*fresh).restart_pending) {
      ResumeOwedRestart(*fresh);  // the previous daemon died before a restart it had scheduled
    }
    if (IsTerminal(state) && !RuntimeFor(*fresh).restart_pending && SettingsFor(*fresh).autostart) {
      log_->info("autostart instance={}", fresh->name);
      Start(fresh->name, [this, name = fresh->name](absl::Status status, std::vector<std::string>) {
        if (!status.ok()) {
          log_->warn("autostart failed instance={} error={}", name, std::string(status.message()));
        }
      });
    }
  }
}

void Supervisor::ResumeOwedRestart(store::InstanceRow& row) {
  const bool crashed = RowState(row) == State::kFailed &&
                       (row.cause.starts_with("crashed{") || row.cause.starts_with("lost{"));
  if (!crashed) {
    return;  // (a clean exit's restart under `always`, due a second later, is not kept)
  }
  const std::optional<int64_t> delay = OwedRestartDelay(SettingsFor(row).restart, row.crash_streak);
  if (!delay.has_value()) {
    return;
  }
  const int64_t left =
      std::clamp<int64_t>(row.state_since_ms + *delay - clock_.NowUnixMs(), 0, *delay);
  log_->info("restart owed since the previous daemon instance={} cause={} in_ms={}", row.name,
             row.cause, left);
  ScheduleRestart(row, {.restart = true, .delay_ms = left, .crash_streak = row.crash_streak});
}

void Supervisor::SendInput(const std::string& name, const std::string& text,
                           std::function<void(absl::StatusOr<Sent>)> done) {
  absl::StatusOr<store::InstanceRow> row = Load(name);
  if (!row.ok()) {
    done(row.status());
    return;
  }
  absl::StatusOr<v1::AdapterSnapshot> snapshot = SnapshotOf(*row);
  if (!snapshot.ok()) {
    done(snapshot.status());
    return;
  }
  const v1::SupportLevel level = snapshot->capabilities().interaction().on_linux();
  if (level != v1::SUPPORT_LEVEL_GUARANTEED && level != v1::SUPPORT_LEVEL_BEST_EFFORT) {
    done(contract::MakeError(
        absl::StatusCode::kFailedPrecondition, reason::kCapabilityUnsupported,
        absl::StrCat("interaction is unsupported on linux for '", name, "' (kind ", row->kind,
                     "): ",
                     level == v1::SUPPORT_LEVEL_UNSPECIFIED
                         ? "the declaration has no interaction entry for linux (a missing entry "
                           "projects to unsupported)"
                         : "the declaration says interaction.linux = \"unsupported\"")));
    return;
  }
  if (RowState(*row) != State::kRunning) {
    done(contract::MakeError(absl::StatusCode::kFailedPrecondition, reason::kInvalidState,
                             absl::StrCat("cannot send to '", name, "' while it is '", row->state,
                                          "' (it must be running)")));
    return;
  }
  const std::string fifo = RunDir(row->home) + "/stdin";
  int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    done(contract::MakeError(
        absl::StatusCode::kInternal, reason::kIoError,
        absl::StrCat("cannot open the stdin channel of '", name, "': ", std::strerror(errno))));
    return;
  }
  struct Write {
    Write(asio::io_context& io, time::Clock& clock, int fd, std::string bytes)
        : pipe(io, fd), timer(clock.NewTimer()), data(std::move(bytes)) {}
    asio::posix::stream_descriptor pipe;
    std::unique_ptr<time::Timer> timer;
    std::string data;
    bool finished = false;
  };
  auto write = std::make_shared<Write>(io_, clock_, fd, text + "\n");
  std::vector<std::string> notices;
  if (level == v1::SUPPORT_LEVEL_BEST_EFFORT) {
    // Surfaced honestly, never silently treated as guaranteed (the contract's rule for a
    // best-effort capability), as a best-effort pause is.
    notices.push_back(
        "interaction is best-effort on linux for this adapter: the line was written to the "
        "agent's stdin; the agent may not act on it");
  }
  auto finish = [write, done, notices](absl::StatusOr<uint64_t> result) {
    if (write->finished) {
      return;
    }
    write->finished = true;
    write->timer->Cancel();
    boost::system::error_code ignored;
    write->pipe.close(ignored);
    if (!result.ok()) {
      done(result.status());
      return;
    }
    done(Sent{*result, notices});
  };
  asio::async_write(
      write->pipe, asio::buffer(write->data),
      [finish](const boost::system::error_code& ec, size_t n) {
        if (ec) {
          finish(contract::MakeError(
              ec == asio::error::operation_aborted ? absl::StatusCode::kDeadlineExceeded
                                                   : absl::StatusCode::kInternal,
              ec == asio::error::operation_aborted ? reason::kTimedOut : reason::kIoError,
              ec == asio::error::operation_aborted
                  ? "the agent did not read its stdin within 5 s"
                  : absl::StrCat("stdin write failed: ", ec.message())));
          return;
        }
        finish(static_cast<uint64_t>(n));
      });
  write->timer->Arm(std::chrono::seconds(5), [write] {
    boost::system::error_code ignored;
    write->pipe.cancel(ignored);
  });
}

}  // namespace ktesio::daemon::supervisor
