#include "supervisor/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "fs/fs.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/status_macros.h"
#include "logs/segments.h"
#include "paths/paths.h"
#include "supervisor/internal.h"
#include "supervisor/runtime.h"

extern char** environ;

namespace ktesio::daemon::supervisor {

namespace reason = contract::reason;
namespace asio = boost::asio;
using internal::BaseEnvironment;
using internal::LevelHere;
using internal::Supported;

using internal::kReadinessWindow;

std::string CurrentBootId() {
  // Read once: it changes only with a reboot, which this process does not outlive (it was read
  // again at every launch). A failed read (out of descriptors) is not kept: the next call reads
  // again.
  static std::mutex mu;
  static std::string id;
  std::lock_guard<std::mutex> lock(mu);
  if (id.empty()) {
    std::ifstream file("/proc/sys/kernel/random/boot_id");
    std::getline(file, id);
  }
  return id;
}

Supervisor::Supervisor(asio::io_context& io, store::Store& store, process::ProcessBackend& backend,
                       time::Clock& clock, std::shared_ptr<spdlog::logger> logger, Hooks hooks)
    : io_(io),
      store_(store),
      backend_(backend),
      clock_(clock),
      log_(std::move(logger)),
      hooks_(std::move(hooks)) {}

Supervisor::~Supervisor() = default;

Supervisor::Runtime& Supervisor::RuntimeFor(const store::InstanceRow& row) {
  std::unique_ptr<Runtime>& runtime = runtimes_[row.name];
  if (runtime == nullptr) {
    runtime = std::make_unique<Runtime>(clock_);
  }
  return *runtime;
}

absl::StatusOr<store::InstanceRow> Supervisor::Load(const std::string& name) {
  KT_RETURN_IF_ERROR(ValidateInstanceName(name));  // a malformed name is a usage error (exit 2)
  KT_ASSIGN_OR_RETURN(std::optional<store::InstanceRow> row, store_.FindInstance(name));
  if (!row.has_value()) {
    return contract::MakeError(absl::StatusCode::kNotFound, reason::kNotFound,
                               absl::StrCat("no Agent Instance named '", name, "'"));
  }
  return std::move(*row);
}

InstanceSettings Supervisor::SettingsFor(const store::InstanceRow& row) {
  return hooks_.settings ? hooks_.settings(row) : InstanceSettings();
}

absl::StatusOr<v1::AdapterSnapshot> SnapshotOf(const store::InstanceRow& row) {
  v1::AdapterSnapshot snapshot;
  if (!snapshot.ParseFromString(row.snapshot)) {
    return contract::MakeError(absl::StatusCode::kInternal, reason::kStoreError,
                               absl::StrCat("the registration snapshot of '", row.name,
                                            "' in state.db is unreadable (run ktesiod --check)"));
  }
  return snapshot;
}

absl::Status Supervisor::Commit(store::InstanceRow& row, State to, const std::string& cause,
                                RunChange run) {
  const State from = RowState(row);
  const int64_t now = clock_.NowUnixMs();
  row.state = std::string(StateName(to));
  row.cause = cause;
  row.state_since_ms = now;
  contract::JsonWriter payload;
  payload.BeginObject().Key("schema_version").Int(1).Key("instance").String(row.name);
  payload.Key("prior_state").String(StateName(from)).Key("new_state").String(StateName(to));
  payload.Key("cause").String(cause).Key("at").String(logs::FormatLogTime(now)).EndObject();
  absl::Status status = store_.InTransaction([&]() -> absl::Status {
    KT_RETURN_IF_ERROR(store_.UpdateInstance(row));
    if (run.kind == RunChange::Kind::kBegin) {
      KT_RETURN_IF_ERROR(store_.BeginRun(row.id, row.current_run, run.at_ms));
    } else if (run.kind == RunChange::Kind::kEnd) {
      KT_RETURN_IF_ERROR(store_.EndRun(row.id, row.current_run, run.at_ms, cause));
    }
    return store_.AppendEvent({0, now, row.name, "transition", payload.str()}).status();
  });
  if (!status.ok()) {
    log_->error("commit failed instance={} to={} error={}", row.name, StateName(to),
                std::string(status.message()));
    return contract::MakeError(status.code(), reason::kStoreError,
                               absl::StrCat("recording '", row.name, "' ", StateName(from), " -> ",
                                            StateName(to), " failed: ", status.message()));
  }
  log_->info("transition instance={} from={} to={} cause=\"{}\"", row.name, StateName(from),
             StateName(to), cause);
  EngineLine(row,
             absl::StrCat("transition ", StateName(from), " -> ", StateName(to), " (", cause, ")"));
  if (hooks_.on_transition) {
    hooks_.on_transition(row, from, to);
  }
  return absl::OkStatus();
}

void Supervisor::RecordEnd(store::InstanceRow row, State to, std::string cause, int64_t ended_at,
                           const std::function<void(const absl::Status&)>& answer,
                           std::function<void(store::InstanceRow&)> recorded) {
  store::InstanceRow attempt = row;
  absl::Status status = Commit(attempt, to, cause, {RunChange::Kind::kEnd, ended_at});
  if (answer) {
    answer(status);
  }
  Runtime& rt = RuntimeFor(row);
  if (status.ok()) {
    if (rt.end_unrecorded) {
      rt.end_unrecorded = false;
      log_->info("recorded after {} failed attempt(s) instance={} to={}", rt.record_attempts,
                 row.name, StateName(to));
      if (hooks_.problem) {
        hooks_.problem(row.name, "");
      }
    }
    rt.record_attempts = 0;
    if (recorded) {
      recorded(attempt);
    }
    return;
  }
  rt.end_unrecorded = true;
  const int64_t delay_ms = std::min<int64_t>(int64_t{100} << std::min(rt.record_attempts, 6), 5000);
  rt.record_attempts += 1;
  if (hooks_.problem) {
    hooks_.problem(row.name, absl::StrCat("the end of run ", row.current_run, " of '", row.name,
                                          "' (", StateName(to), ": ", cause, ") is not recorded: ",
                                          status.message(), "; retrying every ", delay_ms, " ms"));
  }
  rt.record_timer->Arm(std::chrono::milliseconds(delay_ms),
                       [this, row = std::move(row), to, cause = std::move(cause), ended_at,
                        recorded = std::move(recorded)]() mutable {
                         RecordEnd(std::move(row), to, std::move(cause), ended_at, nullptr,
                                   std::move(recorded));
                       });
}

absl::Status Supervisor::RefuseWhileUnrecorded(const store::InstanceRow& row) {
  if (!RuntimeFor(row).end_unrecorded) {
    return absl::OkStatus();
  }
  return contract::MakeError(
      absl::StatusCode::kUnavailable, reason::kStoreError,
      absl::StrCat("the last exit of '", row.name,
                   "' is not recorded yet: the store refuses writes (see ktctl daemon status); "
                   "the daemon keeps retrying"));
}

void Supervisor::EngineLine(const store::InstanceRow& row, const std::string& text) {
  absl::Status status = logs::AppendEngineLine(row.home + "/logs", clock_.NowUnixMs(), text);
  if (!status.ok()) {
    log_->warn("engine log line lost instance={} error={}", row.name,
               std::string(status.message()));
  }
}

void Supervisor::Finish(std::vector<Done>& waiters, const absl::Status& status,
                        std::vector<std::string> notices) {
  std::vector<Done> ready;
  ready.swap(waiters);
  for (Done& done : ready) {
    done(status, notices);
  }
}

namespace internal {

std::vector<std::string> BaseEnvironment() {
  std::vector<std::string> env;
  for (const auto& [key, value] : SafeBaseEnvironment()) {
    env.push_back(absl::StrCat(key, "=", value));
  }
  return env;
}

}  // namespace internal

std::map<std::string, std::string> SafeBaseEnvironment() {
  // Nothing else of the daemon's environment leaks into agents (product.md §4).
  static constexpr const char* kPassed[] = {
      "PATH", "HOME", "LANG",    "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES",
      "TZ",   "USER", "LOGNAME", "SHELL",    "TMPDIR", "TERM"};
  std::map<std::string, std::string> env;
  for (const char* name : kPassed) {
    if (const char* value = std::getenv(name); value != nullptr) {
      env[name] = value;
    }
  }
  return env;
}

absl::StatusOr<store::InstanceRow> Supervisor::Admit(const std::string& name, Command command) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, Load(name));
  KT_RETURN_IF_ERROR(RefuseWhileUnrecorded(row));
  KT_RETURN_IF_ERROR(CheckCommand(RowState(row), command));
  return row;
}

absl::Status Supervisor::RunTemplate(const v1::OpTemplate& op, const store::InstanceRow& row,
                                     std::chrono::milliseconds limit) {
  std::vector<std::string> args(op.args().begin(), op.args().end());
  std::vector<std::string> env = BaseEnvironment();
  for (const auto& [key, value] : op.env()) {
    env.push_back(absl::StrCat(key, "=", value));
  }
  return backend_.RunDetached(op.exec(), args, env, row.home, limit);
}

void Supervisor::Start(const std::string& name, Done done) {
  if (shutting_down_) {
    done(ShuttingDown(), {});
    return;
  }
  absl::StatusOr<store::InstanceRow> row = Admit(name, Command::kStart);
  if (!row.ok()) {
    done(row.status(), {});
    return;
  }
  Runtime& rt = RuntimeFor(*row);
  // An operator start supersedes a pending automatic restart and resets the crash counters.
  rt.restart_pending = false;
  rt.restart_timer->Cancel();
  row->crash_streak = 0;
  row->restart_count = 0;
  rt.automatic_start = false;
  rt.start_waiters.push_back(std::move(done));
  Launch(std::move(*row), false);
}

void Supervisor::Launch(store::InstanceRow row, bool automatic) {
  Runtime& rt = RuntimeFor(row);
  v1::AdapterSnapshot snapshot;
  if (!snapshot.ParseFromString(row.snapshot)) {
    Finish(rt.start_waiters, contract::MakeError(absl::StatusCode::kInternal, reason::kStoreError,
                                                 "the registration snapshot is unreadable"));
    return;
  }
  Delivery delivery;
  if (hooks_.deliver) {
    absl::StatusOr<Delivery> rendered = hooks_.deliver(row, snapshot);
    if (!rendered.ok()) {
      // Refused before launch: the state is unchanged (for an automatic restart the instance
      // stays failed with the refusal as its cause).
      if (automatic) {
        // Ignored: the instance is failed (or stopped) already, no process exists; a failed
        // write only keeps the previous cause.
        Commit(row, State::kFailed, absl::StrCat("launch-error{", rendered.status().message(), "}"))
            .IgnoreError();
      }
      Finish(rt.start_waiters, rendered.status());
      return;
    }
    delivery = std::move(*rendered);
  }
  const InstanceSettings settings = SettingsFor(row);
  row.current_run += 1;
  row.pid.reset();
  row.pid_start_time.reset();
  row.shim_pid.reset();
  row.shim_start_time.reset();
  const std::string cause = automatic ? absl::StrCat("restarted{count=", row.restart_count,
                                                     ",waited_ms=", rt.restart_delay_ms, "}")
                                      : "start-requested";
  if (absl::Status status =
          Commit(row, State::kStarting, cause, {RunChange::Kind::kBegin, clock_.NowUnixMs()});
      !status.ok()) {
    Finish(rt.start_waiters, status);
    return;
  }
  rt.automatic_start = automatic;
  rt.pending_budget.reset();
  rt.start_notices = delivery.notices;

  process::LaunchSpec spec;
  spec.exec = snapshot.start().exec();
  spec.args.assign(snapshot.start().args().begin(), snapshot.start().args().end());
  spec.args.insert(spec.args.end(), delivery.extra_args.begin(), delivery.extra_args.end());
  std::map<std::string, std::string> env;
  for (const std::string& entry : BaseEnvironment()) {
    env[entry.substr(0, entry.find('='))] = entry.substr(entry.find('=') + 1);
  }
  for (const auto& [key, value] : snapshot.start().env()) {
    env[key] = value;
  }
  for (const auto& [key, value] : delivery.env) {
    env[key] = value;
  }
  for (const auto& [key, value] : env) {
    spec.env.push_back(absl::StrCat(key, "=", value));
  }
  spec.cwd = row.home;
  spec.stdin_pipe = Supported(LevelHere(snapshot.capabilities().interaction()));
  spec.run_dir = RunDir(row.home);
  spec.log_dir = row.home + "/logs";
  spec.log_max_bytes = settings.log_max_bytes;
  spec.log_keep = settings.log_keep;
  if (snapshot.metering_source() == v1::METERING_SOURCE_SELF_REPORTED) {
    spec.usage_file = absl::StrCat(spec.run_dir, "/usage-", row.current_run, ".log");
    // A relaunch in place that was never recorded (killed as a stop began, lost to a reboot)
    // may have left lines under this run's number: they are not this run's.
    ::unlink(spec.usage_file.c_str());
  }
  rt.config_changed = false;  // this launch delivers the configuration as it is now
  const uint64_t generation = ++rt.generation;
  const std::string name = row.name;
  backend_.Launch(spec, [this, name, generation](absl::StatusOr<process::Launched> launched) {
    OnLaunched(name, generation, std::move(launched));
  });
}

Supervisor::Runtime* Supervisor::StillStarting(const std::string& name, uint64_t generation,
                                               store::InstanceRow& row) {
  absl::StatusOr<store::InstanceRow> loaded = Load(name);
  if (!loaded.ok()) {
    return nullptr;
  }
  Runtime& rt = RuntimeFor(*loaded);
  if (rt.generation != generation || RowState(*loaded) != State::kStarting) {
    return nullptr;
  }
  row = std::move(*loaded);
  return &rt;
}

void Supervisor::OnLaunched(const std::string& name, uint64_t generation,
                            absl::StatusOr<process::Launched> launched) {
  store::InstanceRow row;
  Runtime* const rt = StillStarting(name, generation, row);
  if (rt == nullptr) {
    return;
  }
  if (!launched.ok()) {
    row.last_exit = std::string(launched.status().message());
    std::optional<RestartDecision> decision;
    if (rt->automatic_start) {
      decision = DecideRestart(SettingsFor(row).restart, {false, 0, row.crash_streak});
      row.crash_streak = decision->crash_streak;  // committed with the transition
    }
    RecordEnd(
        std::move(row), State::kFailed,
        absl::StrCat("launch-error{", launched.status().message(), "}"), clock_.NowUnixMs(),
        [this, rt](const absl::Status& status) {
          Finish(rt->start_waiters, status, rt->start_notices);
        },
        [this, decision](store::InstanceRow& committed) {
          if (decision.has_value()) {
            ScheduleRestart(committed, *decision);
          }
        });
    return;
  }
  // The write-ahead spawn record: committed before the agent counts as supervised.
  row.pid = launched->agent.pid;
  row.pid_start_time = launched->agent.start_time;
  row.shim_pid = launched->shim.pid;
  row.shim_start_time = launched->shim.start_time;
  row.boot_id = CurrentBootId();
  row.started_at_ms = clock_.NowUnixMs();
  if (absl::Status status = store_.UpdateInstance(row); !status.ok()) {
    log_->error("spawn record not committed instance={} error={}", name,
                std::string(status.message()));
  }
  backend_.WatchExit(launched->shim, [this, name, generation] { OnExit(name, generation); });
  WatchShim(launched->shim, name, row.home, generation);
  rt->ready_timer->Arm(kReadinessWindow, [this, name, generation] { OnReady(name, generation); });
}

void Supervisor::OnReady(const std::string& name, uint64_t generation) {
  store::InstanceRow row;
  Runtime* const rt = StillStarting(name, generation, row);
  if (rt == nullptr) {
    return;
  }
  absl::Status status = Commit(row, State::kRunning, "adapter-ready");
  if (status.ok()) {
    GrantRespawn(row);
  }
  Finish(rt->start_waiters, status, rt->start_notices);
  if (rt->pending_budget.has_value()) {
    auto [stop, cause] = *rt->pending_budget;
    rt->pending_budget.reset();
    BudgetAction(name, stop, cause);
  }
}

absl::Status Supervisor::ShuttingDown() const {
  return contract::MakeError(
      absl::StatusCode::kUnavailable, reason::kShuttingDown,
      "ktesiod is shutting down: what was under way goes on, and the next ktesiod takes it over");
}

void Supervisor::AnswerWaitersAtShutdown() {
  shutting_down_ = true;
  // Collected first: a waiter's callback may act on the supervisor (and erase a Runtime).
  std::vector<Done> waiting;
  for (auto& [name, rt] : runtimes_) {
    for (std::vector<Done>* waiters : {&rt->start_waiters, &rt->stop_waiters}) {
      std::move(waiters->begin(), waiters->end(), std::back_inserter(waiting));
      waiters->clear();
    }
  }
  const absl::Status status = ShuttingDown();
  for (Done& done : waiting) {
    done(status, {});
  }
}

void Supervisor::AwaitSettled(const std::string& name, Done done) {
  // Always answered from the event loop, never from inside the supervisor's own frames: the
  // caller may remove the instance (erasing the Runtime a Finish is iterating over).
  auto later = [this](Done& answer, absl::Status status) {
    boost::asio::post(
        io_, [answer = std::move(answer), status = std::move(status)] { answer(status, {}); });
  };
  if (shutting_down_) {
    later(done, ShuttingDown());
    return;
  }
  absl::StatusOr<store::InstanceRow> row = Load(name);
  if (!row.ok()) {
    later(done, absl::OkStatus());  // gone: the caller's own lookup says so
    return;
  }
  Runtime& rt = RuntimeFor(*row);
  const State state = RowState(*row);
  if (absl::Status status = RefuseWhileUnrecorded(*row); !status.ok()) {
    later(done, std::move(status));  // the end of the run waits for the store, not for us
    return;
  }
  if (state == State::kStopping && rt.stop_unconfirmed) {
    later(done, contract::MakeError(absl::StatusCode::kDeadlineExceeded, reason::kStopNotConfirmed,
                                    absl::StrCat("the process group of '", name,
                                                 "' did not exit after SIGKILL; it stays "
                                                 "'stopping'")));
    return;
  }
  if (state != State::kStarting && state != State::kStopping) {
    later(done, absl::OkStatus());
    return;
  }
  // Answered once: by the transition's end, or by a bound past the longest it can take (a start
  // settles within the launch confirmation and the readiness window; a stop within its window
  // and the 5 s confirmation), so a waiter is never kept for ever by a row with nothing under way.
  struct Wait {
    Done done;
    std::unique_ptr<time::Timer> bound;
    bool answered = false;
  };
  auto wait = std::make_shared<Wait>();
  wait->done = std::move(done);
  wait->bound = clock_.NewTimer();
  auto answer = [this, wait](absl::Status status) {
    if (wait->answered) {
      return;
    }
    wait->answered = true;
    boost::asio::post(io_, [wait, status = std::move(status)] {
      wait->bound.reset();  // drops the bound's pending fire (and its hold on `wait`)
      wait->done(status, {});
    });
  };
  const std::chrono::seconds bound = state == State::kStopping
                                         ? std::chrono::seconds(rt.stop_window_s + 15)
                                         : std::chrono::seconds(60);
  wait->bound->Arm(bound, [answer, name, state, bound] {
    answer(contract::MakeError(absl::StatusCode::kFailedPrecondition, reason::kInvalidState,
                               absl::StrCat("'", name, "' is still '", StateName(state), "' after ",
                                            bound.count(), " s with nothing under way to end it")));
  });
  Done settled = [answer](const absl::Status& status, const std::vector<std::string>&) {
    // Not settled at all when the daemon is shutting down (AnswerWaitersAtShutdown).
    const std::string why = contract::ErrorReason(status);
    const bool unsettled = why == reason::kStopNotConfirmed || why == reason::kShuttingDown;
    answer(unsettled ? status : absl::OkStatus());
  };
  (state == State::kStarting ? rt.start_waiters : rt.stop_waiters).push_back(std::move(settled));
}

void Supervisor::Forget(const std::string& name) { runtimes_.erase(name); }

bool Supervisor::RestartPending(const std::string& name) const {
  auto it = runtimes_.find(name);
  return it != runtimes_.end() && it->second->restart_pending;
}

}  // namespace ktesio::daemon::supervisor
