// The supervisor against a fake process backend and a fake clock (tests/support/fakes): restart
// backoff timing, the crash-loop bound, stop escalation, budget actions and reconciliation,
// with a real store and no process or sleep. The same behaviour runs for real in the
// integration suite (lifecycle_test.cc).

#include "supervisor/supervisor.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "fakes/fake_clock.h"
#include "fakes/fake_process_backend.h"
#include "gtest/gtest.h"
#include "ktesio/contract/error.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "status_assertions.h"
#include "store_fault_seam.h"

namespace ktesio::daemon::supervisor {
namespace {

using ::ktesio::testing::FakeClock;
using ::ktesio::testing::FakeProcessBackend;
using std::chrono::milliseconds;
using ExitRecord = process::ExitRecord;

constexpr milliseconds kReadiness(300);  // the supervisor's readiness window

// What a command reported.
struct Outcome {
  bool called = false;
  absl::Status status;
  std::vector<std::string> notices;
};

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/kt-supervisor-XXXXXX";
    dir_ = mkdtemp(templ);
    store_ = std::move(store::Store::Open(dir_ + "/state.db")).value();
    settings_.restart.policy = RestartPolicyKind::kOnFailure;
    settings_.restart.backoff_initial_ms = 1000;
    settings_.restart.backoff_max_ms = 8000;
    settings_.restart.max_consecutive = 4;
    settings_.restart.reset_after_ms = 60000;
    MakeSupervisor();
  }
  void TearDown() override {
    testing::SetStoreFault(false);
    supervisor_.reset();
    std::filesystem::remove_all(dir_);
  }

  void MakeSupervisor() {
    supervisor_.reset();
    Hooks hooks;
    hooks.settings = [this](const store::InstanceRow&) { return settings_; };
    hooks.on_transition = [this](const store::InstanceRow& row, State, State to) {
      transitions_.push_back(row.name + ":" + StateName(to));
      if (transitions_.back() == fault_after_) {
        testing::SetStoreFault(true);  // every later commit is refused, as on a failing disk
      }
    };
    supervisor_ = std::make_unique<Supervisor>(
        io_, *store_, backend_, clock_,
        std::make_shared<spdlog::logger>("test",
                                         std::make_shared<spdlog::sinks::ostream_sink_mt>(log_)),
        hooks);
  }

  // Registers `name`; `pause` is its declared pause level on linux.
  // `pause_template` names the pause template's program ("" = none; resume gets "...-resume").
  void Register(const std::string& name, v1::SupportLevel pause = v1::SUPPORT_LEVEL_GUARANTEED,
                const std::string& pause_template = "") {
    v1::AdapterSnapshot snapshot;
    snapshot.set_kind("fake");
    snapshot.mutable_start()->set_exec("/usr/bin/agent");
    if (!pause_template.empty()) {
      snapshot.mutable_pause()->set_exec(pause_template);
      (*snapshot.mutable_pause()->mutable_env())["KT_TEMPLATE"] = "pause";
      snapshot.mutable_resume()->set_exec(pause_template + "-resume");
    }
    snapshot.mutable_capabilities()->mutable_pause()->set_on_linux(pause);
    store::InstanceRow row;
    row.name = name;
    row.kind = "fake";
    row.snapshot = snapshot.SerializeAsString();
    row.state = "registered";
    row.state_since_ms = clock_.NowUnixMs();
    row.registered_at_ms = clock_.NowUnixMs();
    row.home = dir_ + "/agents/" + name;
    std::filesystem::create_directories(row.home + "/logs");
    KT_ASSERT_OK(store_->InsertInstance(row));
  }

  store::InstanceRow Row(const std::string& name) {
    return std::move(store_->FindInstance(name)).value().value();
  }
  std::string StateOf(const std::string& name) { return Row(name).state; }
  std::string CauseOf(const std::string& name) { return Row(name).cause; }

  // Lets posted completions (launches, exits) land.
  void Settle() {
    io_.restart();
    io_.poll();
  }
  void Advance(milliseconds by) {
    Settle();
    clock_.Advance(by);
    Settle();
  }

  Done Record(Outcome& outcome) {
    return [&outcome](absl::Status status, std::vector<std::string> notices) {
      outcome.called = true;
      outcome.status = std::move(status);
      outcome.notices = std::move(notices);
    };
  }

  // Registers and starts "a", then the daemon dies and its shim relaunches the agent after it
  // exits with `exit` (a 5 s run, under the grant). A new supervisor is in place, not yet
  // reconciled. Returns the relaunched agent's pid (0 when the shim did not relaunch).
  pid_t RelaunchedWhileNoDaemonRuns(ExitRecord exit) {
    Register("a");
    StartRunning("a");
    backend_.DropWatches();
    MakeSupervisor();
    backend_.set_now_ms(clock_.NowUnixMs());
    return backend_.ExitUnderGrant(Row("a").pid.value(), exit, 5000);
  }

  // Starts `name` and lets it become running.
  void StartRunning(const std::string& name) {
    Outcome started;
    supervisor_->Start(name, Record(started));
    Advance(kReadiness);
    ASSERT_TRUE(started.called);
    KT_ASSERT_OK(started.status);
    ASSERT_EQ(StateOf(name), "running");
  }

  std::string dir_;
  boost::asio::io_context io_;
  FakeClock clock_;
  FakeProcessBackend backend_{io_};
  std::unique_ptr<store::Store> store_;
  InstanceSettings settings_;
  std::ostringstream log_;  // what the supervisor logged (outlives its logger)
  std::unique_ptr<Supervisor> supervisor_;
  std::vector<std::string> transitions_;
  std::string fault_after_;  // "name:state": the store refuses commits after that transition
};

TEST_F(SupervisorTest, StartIsRunningOnlyAfterTheReadinessWindow) {
  Register("a");
  Outcome started;
  supervisor_->Start("a", Record(started));
  Settle();
  EXPECT_EQ(StateOf("a"), "starting");
  EXPECT_EQ(Row("a").pid, backend_.last_agent());  // the spawn record is written ahead
  Advance(kReadiness - milliseconds(1));
  EXPECT_EQ(StateOf("a"), "starting");
  EXPECT_FALSE(started.called);
  Advance(milliseconds(1));
  EXPECT_EQ(StateOf("a"), "running");
  EXPECT_EQ(CauseOf("a"), "adapter-ready");
  ASSERT_TRUE(started.called);
  KT_EXPECT_OK(started.status);
  ASSERT_EQ(backend_.launches().size(), 1u);
  EXPECT_EQ(backend_.launches()[0].exec, "/usr/bin/agent");
  EXPECT_EQ(backend_.launches()[0].cwd, Row("a").home);
}

TEST_F(SupervisorTest, ExitInsideTheReadinessWindowIsALaunchError) {
  Register("a");
  Outcome started;
  supervisor_->Start("a", Record(started));
  Settle();
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 2});
  Settle();
  EXPECT_EQ(StateOf("a"), "failed");
  EXPECT_EQ(CauseOf("a"),
            "launch-error{'/usr/bin/agent' exited within the readiness window: exit code 2}");
  ASSERT_TRUE(started.called);
  // A start whose launch failed completes OK with the instance failed (the caller reads why).
  KT_EXPECT_OK(started.status);
  Advance(milliseconds(60000));
  EXPECT_EQ(backend_.launches().size(), 1u);  // an operator start is not retried
}

TEST_F(SupervisorTest, ALaunchFailureIsReportedWithTheBackendsReason) {
  Register("a");
  backend_.FailNextLaunch(contract::MakeError(absl::StatusCode::kNotFound,
                                              contract::reason::kLaunchFailed,
                                              "cannot execute '/usr/bin/agent': No such file"));
  Outcome started;
  supervisor_->Start("a", Record(started));
  Settle();
  EXPECT_EQ(StateOf("a"), "failed");
  EXPECT_EQ(CauseOf("a"), "launch-error{cannot execute '/usr/bin/agent': No such file}");
  ASSERT_TRUE(started.called);
}

TEST_F(SupervisorTest, CrashesRestartWithExponentialBackoff) {
  Register("a");
  StartRunning("a");
  // The first crash restarts at once; then 1 s, 2 s, 4 s ... (backoff_initial 1000 ms).
  const std::vector<int64_t> delays = {0, 1000, 2000};
  for (size_t i = 0; i < delays.size(); ++i) {
    const size_t launches = backend_.launches().size();
    backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3});
    Settle();
    EXPECT_EQ(StateOf("a"), "failed") << "crash " << i + 1;
    EXPECT_EQ(CauseOf("a"), "crashed{exit code 3}");
    EXPECT_TRUE(supervisor_->RestartPending("a"));
    if (delays[i] > 0) {
      Advance(milliseconds(delays[i] - 1));
      EXPECT_EQ(backend_.launches().size(), launches) << "restarted early after crash " << i + 1;
    }
    Advance(milliseconds(delays[i] > 0 ? 1 : 0));
    ASSERT_EQ(backend_.launches().size(), launches + 1) << "no restart after crash " << i + 1;
    EXPECT_EQ(StateOf("a"), "starting");
    EXPECT_EQ(CauseOf("a"), "restarted{count=" + std::to_string(i + 1) +
                                ",waited_ms=" + std::to_string(delays[i]) + "}");
    Advance(kReadiness);
    EXPECT_EQ(StateOf("a"), "running");
  }
  EXPECT_EQ(Row("a").restart_count, 3);
  EXPECT_EQ(Row("a").restarts_total, 3);
  EXPECT_EQ(Row("a").crash_streak, 3);
}

// The daemon dies while a crashed instance waits out its backoff: the next daemon finds it
// `failed` and still owes it the restart, for the time left of that backoff.
TEST_F(SupervisorTest, ARestartScheduledByADeadDaemonIsOwedByTheNextOne) {
  Register("a");
  StartRunning("a");
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3});  // restarts at once
  Settle();
  Advance(milliseconds(0));
  Advance(kReadiness);
  ASSERT_EQ(StateOf("a"), "running");
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3});  // waits 1000 ms
  Settle();
  ASSERT_EQ(StateOf("a"), "failed");
  ASSERT_TRUE(supervisor_->RestartPending("a"));
  const size_t launches = backend_.launches().size();
  Advance(milliseconds(400));
  backend_.DropWatches();
  MakeSupervisor();  // a new daemon: the old one's timer is gone
  supervisor_->Reconcile();
  Settle();
  EXPECT_TRUE(supervisor_->RestartPending("a"));
  Advance(milliseconds(599));
  EXPECT_EQ(backend_.launches().size(), launches) << "restarted before the backoff ended";
  Advance(milliseconds(1));
  ASSERT_EQ(backend_.launches().size(), launches + 1) << "the owed restart never came";
  Advance(kReadiness);
  EXPECT_EQ(StateOf("a"), "running");
  EXPECT_EQ(Row("a").restart_count, 2);

  // A crash under `never` decides no restart and keeps no streak: a later daemon owes it nothing,
  // even once the policy allows restarts again.
  settings_.restart.policy = RestartPolicyKind::kNever;
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3});
  Settle();
  ASSERT_EQ(StateOf("a"), "failed");
  EXPECT_EQ(Row("a").crash_streak, 0);
  settings_.restart.policy = RestartPolicyKind::kOnFailure;
  backend_.DropWatches();
  MakeSupervisor();
  supervisor_->Reconcile();
  Settle();
  EXPECT_FALSE(supervisor_->RestartPending("a"));
}

// restart_count is since the last operator start; restarts_total (the Prometheus counter) only
// grows: an operator stop and start must not read to a scraper as a counter reset.
TEST_F(SupervisorTest, AnOperatorStartResetsRestartCountButNotTheLifetimeTotal) {
  Register("a");
  StartRunning("a");
  for (int crash = 0; crash < 2; ++crash) {
    backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3});
    Settle();
    Advance(milliseconds(crash == 0 ? 0 : 1000));
    Advance(kReadiness);
    ASSERT_EQ(StateOf("a"), "running") << "crash " << crash + 1;
  }
  EXPECT_EQ(Row("a").restart_count, 2);
  EXPECT_EQ(Row("a").restarts_total, 2);
  Outcome stopped;
  supervisor_->Stop("a", std::nullopt, Record(stopped));
  Settle();
  ASSERT_TRUE(stopped.called);
  ASSERT_EQ(StateOf("a"), "stopped");
  StartRunning("a");
  EXPECT_EQ(Row("a").restart_count, 0);
  EXPECT_EQ(Row("a").restarts_total, 2);
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3});
  Settle();
  Advance(milliseconds(0));  // the streak started over: the first crash restarts at once
  Advance(kReadiness);
  ASSERT_EQ(StateOf("a"), "running");
  EXPECT_EQ(Row("a").restart_count, 1);
  EXPECT_EQ(Row("a").restarts_total, 3);
}

TEST_F(SupervisorTest, TheCrashLoopBoundEndsRestarts) {
  Register("a");
  StartRunning("a");
  for (int crash = 1; crash < settings_.restart.max_consecutive; ++crash) {
    backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kSignaled, SIGSEGV});
    Settle();
    ASSERT_TRUE(supervisor_->RestartPending("a")) << "crash " << crash;
    Advance(milliseconds(settings_.restart.backoff_max_ms));  // restarted
    Advance(kReadiness);                                      // and running again
    ASSERT_EQ(StateOf("a"), "running");
  }
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kSignaled, SIGSEGV});
  Settle();
  EXPECT_EQ(StateOf("a"), "failed");
  EXPECT_EQ(CauseOf("a"), "crash-loop{4 consecutive crashes, last: signal 11 (SIGSEGV)}");
  EXPECT_FALSE(supervisor_->RestartPending("a"));
  EXPECT_FALSE(clock_.NextDueIn().has_value()) << "a timer is still armed";
  const size_t launches = backend_.launches().size();
  Advance(milliseconds(3600 * 1000));
  EXPECT_EQ(backend_.launches().size(), launches);
}

TEST_F(SupervisorTest, AHealthyRunResetsTheCrashStreak) {
  Register("a");
  StartRunning("a");
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 1});
  Advance(milliseconds(0));  // immediate restart
  Advance(kReadiness);
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 1});
  Settle();
  EXPECT_EQ(Row("a").crash_streak, 2);
  Advance(milliseconds(1000));
  Advance(milliseconds(settings_.restart.reset_after_ms));  // up longer than reset_after
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 1});
  Settle();
  EXPECT_EQ(Row("a").crash_streak, 1);  // counted afresh: restarts at once again
  const size_t launches = backend_.launches().size();
  Advance(milliseconds(0));
  EXPECT_EQ(backend_.launches().size(), launches + 1);
}

TEST_F(SupervisorTest, ACleanExitUnderOnFailureStaysStopped) {
  Register("a");
  StartRunning("a");
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 0});
  Settle();
  EXPECT_EQ(StateOf("a"), "stopped");
  EXPECT_EQ(CauseOf("a"), "exited");
  EXPECT_FALSE(supervisor_->RestartPending("a"));
}

TEST_F(SupervisorTest, AGracefulStopSendsSigtermOnly) {
  Register("a");
  StartRunning("a");
  const pid_t agent = backend_.last_agent();
  Outcome stopped;
  supervisor_->Stop("a", std::nullopt, Record(stopped));
  Settle();
  ASSERT_TRUE(stopped.called);
  KT_EXPECT_OK(stopped.status);
  EXPECT_EQ(StateOf("a"), "stopped");
  EXPECT_EQ(CauseOf("a"), "stop-graceful");
  EXPECT_EQ(backend_.SignalsSent(agent, SIGTERM), 1);
  EXPECT_FALSE(clock_.NextDueIn().has_value()) << "the stop window timer outlived the stop";
}

// A raw API call can name any uint32 window: beyond a day it is refused before anything changes
// (4294967295 s would leave the instance `stopping` for 136 years, refusing every other stop).
TEST_F(SupervisorTest, AStopWindowBeyondADayIsRefusedAndChangesNothing) {
  Register("a");
  StartRunning("a");
  for (const uint32_t window : {kMaxStopWindowSeconds + 1, 4294967295u}) {
    Outcome stopped;
    supervisor_->Stop("a", window, Record(stopped));
    Settle();
    ASSERT_TRUE(stopped.called);
    EXPECT_TRUE(testing::StatusIs(stopped.status, absl::StatusCode::kInvalidArgument,
                                  contract::reason::kInvalidArgument, "at most 86400 s"));
    Outcome restarted;
    supervisor_->Restart("a", window, Record(restarted));
    Settle();
    ASSERT_TRUE(restarted.called);
    EXPECT_EQ(restarted.status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(StateOf("a"), "running");
  }
  Outcome stopped;
  supervisor_->Stop("a", kMaxStopWindowSeconds, Record(stopped));
  Settle();
  ASSERT_TRUE(stopped.called);
  KT_EXPECT_OK(stopped.status);
  EXPECT_EQ(StateOf("a"), "stopped");
}

TEST_F(SupervisorTest, AStopEscalatesToSigkillWhenTheWindowEnds) {
  Register("a");
  StartRunning("a");
  backend_.set_exits_on_sigterm(false);
  const pid_t agent = backend_.last_agent();
  Outcome stopped;
  supervisor_->Stop("a", 10u, Record(stopped));
  Settle();
  EXPECT_EQ(StateOf("a"), "stopping");
  EXPECT_EQ(backend_.SignalsSent(agent, SIGTERM), 1);
  Advance(milliseconds(9999));
  EXPECT_EQ(backend_.SignalsSent(agent, SIGKILL), 0);
  EXPECT_FALSE(stopped.called);
  Advance(milliseconds(1));
  EXPECT_GE(backend_.SignalsSent(agent, SIGKILL), 1);
  ASSERT_TRUE(stopped.called);
  KT_EXPECT_OK(stopped.status);
  EXPECT_EQ(StateOf("a"), "stopped");
  EXPECT_EQ(CauseOf("a"), "stop-forced{SIGKILL after 10 s}");
}

TEST_F(SupervisorTest, AStopThatSigkillCannotEndIsReportedNotConfirmed) {
  Register("a");
  StartRunning("a");
  backend_.set_exits_on_sigterm(false);
  backend_.set_exits_on_sigkill(false);
  Outcome stopped;
  supervisor_->Stop("a", 2u, Record(stopped));
  Advance(milliseconds(2000));
  EXPECT_FALSE(stopped.called);
  Advance(milliseconds(5000));  // the confirmation window after SIGKILL
  ASSERT_TRUE(stopped.called);
  EXPECT_EQ(contract::ErrorReason(stopped.status), contract::reason::kStopNotConfirmed);
  EXPECT_EQ(StateOf("a"), "stopping");
}

// remove --force waits for a transition under way: AwaitSettled answers (always from the event
// loop) when it ends, however it ends, and soon in a settled state.
TEST_F(SupervisorTest, AwaitSettledAnswersWhenTheTransitionUnderWayEnds) {
  Register("a");
  Outcome idle;
  supervisor_->AwaitSettled("a", Record(idle));
  EXPECT_FALSE(idle.called) << "answered from inside the call";
  Settle();
  ASSERT_TRUE(idle.called) << "registered is settled";

  Outcome started;
  supervisor_->Start("a", Record(started));
  Settle();
  ASSERT_EQ(StateOf("a"), "starting");
  Outcome up;
  supervisor_->AwaitSettled("a", Record(up));
  Settle();
  EXPECT_FALSE(up.called);
  Advance(kReadiness);
  ASSERT_TRUE(up.called);
  KT_EXPECT_OK(up.status);
  EXPECT_EQ(StateOf("a"), "running");

  backend_.set_exits_on_sigterm(false);
  backend_.set_exits_on_sigkill(false);
  Outcome stopped;
  supervisor_->Stop("a", 2u, Record(stopped));
  Settle();
  Outcome down;
  supervisor_->AwaitSettled("a", Record(down));
  Advance(milliseconds(2000));
  EXPECT_FALSE(down.called);
  Advance(milliseconds(5000));  // the stop ends unconfirmed: the waiter hears so
  ASSERT_TRUE(down.called);
  EXPECT_EQ(contract::ErrorReason(down.status), contract::reason::kStopNotConfirmed);
  EXPECT_EQ(contract::ErrorReason(stopped.status), contract::reason::kStopNotConfirmed);
  EXPECT_EQ(StateOf("a"), "stopping");
  // Nothing is under way any more: a later waiter is answered at once, not kept for ever.
  Outcome stuck;
  supervisor_->AwaitSettled("a", Record(stuck));
  Settle();
  ASSERT_TRUE(stuck.called);
  EXPECT_EQ(contract::ErrorReason(stuck.status), contract::reason::kStopNotConfirmed);
}

// A row left `starting` with no launch under way (as a store that refused the adoption's commit
// leaves it) would keep a waiter for ever: the bound answers it.
TEST_F(SupervisorTest, AwaitSettledIsBoundedWhenNothingIsUnderWay) {
  Register("a");
  store::InstanceRow row = Row("a");
  row.state = "starting";
  ASSERT_TRUE(store_->UpdateInstance(row).ok());
  Outcome waited;
  supervisor_->AwaitSettled("a", Record(waited));
  Advance(milliseconds(59999));
  EXPECT_FALSE(waited.called);
  Advance(milliseconds(1));
  ASSERT_TRUE(waited.called);
  EXPECT_TRUE(testing::StatusIs(waited.status, absl::StatusCode::kFailedPrecondition,
                                contract::reason::kInvalidState, "is still 'starting' after 60 s"));
}

// The daemon dies during a stop's window: the next one re-adopts the stopping agent and gives it
// what is left of the default window before the SIGKILL, rather than killing it at once.
TEST_F(SupervisorTest, AStopReAdoptedMidWindowKeepsTheRestOfTheDefaultWindow) {
  Register("a");
  StartRunning("a");
  const pid_t agent = backend_.last_agent();
  backend_.set_exits_on_sigterm(false);
  Outcome stopped;
  supervisor_->Stop("a", 20u, Record(stopped));
  Settle();
  ASSERT_EQ(StateOf("a"), "stopping");
  Advance(milliseconds(5000));
  backend_.DropWatches();
  MakeSupervisor();  // default window: 30 s, of which 25 s are left
  supervisor_->Reconcile();
  Settle();
  EXPECT_EQ(backend_.SignalsSent(agent, SIGKILL), 0) << "killed at once on re-adoption";
  EXPECT_EQ(StateOf("a"), "stopping");
  Advance(milliseconds(24999));
  EXPECT_EQ(backend_.SignalsSent(agent, SIGKILL), 0) << "killed before the window ended";
  Advance(milliseconds(1));
  EXPECT_GE(backend_.SignalsSent(agent, SIGKILL), 1);
  EXPECT_EQ(StateOf("a"), "stopped");
  EXPECT_EQ(CauseOf("a"), "stop-forced{SIGKILL after 30 s}");
}

// A shutting-down daemon answers the callers of a stop under way (UNAVAILABLE) instead of holding
// its shutdown for the window; the stop goes on for the next daemon to finish.
TEST_F(SupervisorTest, ShutdownAnswersTheWaitersOfAStopUnderWay) {
  Register("a");
  StartRunning("a");
  backend_.set_exits_on_sigterm(false);
  Outcome stopped;
  supervisor_->Stop("a", 60u, Record(stopped));
  Outcome settled;
  supervisor_->AwaitSettled("a", Record(settled));
  Settle();
  ASSERT_FALSE(stopped.called);
  supervisor_->AnswerWaitersAtShutdown();
  Settle();
  ASSERT_TRUE(stopped.called);
  EXPECT_EQ(stopped.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(contract::ErrorReason(stopped.status), contract::reason::kShuttingDown);
  ASSERT_TRUE(settled.called);
  EXPECT_EQ(settled.status.code(), absl::StatusCode::kUnavailable) << "read as settled";
  EXPECT_EQ(StateOf("a"), "stopping");
  // From now on nothing queues a waiter the server's shutdown would wait for.
  Register("b");
  Outcome late_start;
  supervisor_->Start("b", Record(late_start));
  ASSERT_TRUE(late_start.called);
  EXPECT_EQ(contract::ErrorReason(late_start.status), contract::reason::kShuttingDown);
  EXPECT_EQ(StateOf("b"), "registered");
  Outcome late_stop;
  supervisor_->Stop("a", 5u, Record(late_stop));
  ASSERT_TRUE(late_stop.called);
  EXPECT_EQ(contract::ErrorReason(late_stop.status), contract::reason::kShuttingDown);
  Outcome late_wait;
  supervisor_->AwaitSettled("a", Record(late_wait));
  Settle();
  ASSERT_TRUE(late_wait.called);
  EXPECT_EQ(contract::ErrorReason(late_wait.status), contract::reason::kShuttingDown);
}

TEST_F(SupervisorTest, AZeroWindowStopKillsAtOnce) {
  Register("a");
  StartRunning("a");
  const pid_t agent = backend_.last_agent();
  Outcome stopped;
  supervisor_->Stop("a", 0u, Record(stopped));
  Settle();
  EXPECT_EQ(backend_.SignalsSent(agent, SIGTERM), 0);
  EXPECT_GE(backend_.SignalsSent(agent, SIGKILL), 1);
  EXPECT_EQ(CauseOf("a"), "stop-forced{SIGKILL after 0 s}");
}

TEST_F(SupervisorTest, AnOperatorStopCancelsAPendingRestart) {
  Register("a");
  StartRunning("a");
  settings_.restart.backoff_initial_ms = 5000;
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 1});
  Advance(milliseconds(0));
  Advance(kReadiness);
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 1});  // waits 5 s now
  Settle();
  ASSERT_TRUE(supervisor_->RestartPending("a"));
  Outcome stopped;
  supervisor_->Stop("a", std::nullopt, Record(stopped));
  ASSERT_TRUE(stopped.called);
  KT_EXPECT_OK(stopped.status);
  EXPECT_EQ(stopped.notices,
            std::vector<std::string>{"the pending automatic restart was cancelled"});
  const size_t launches = backend_.launches().size();
  Advance(milliseconds(60000));
  EXPECT_EQ(backend_.launches().size(), launches);
  EXPECT_EQ(StateOf("a"), "failed");
  // The cancel outlives the daemon: the next one does not find the restart owed.
  backend_.DropWatches();
  MakeSupervisor();
  supervisor_->Reconcile();
  Settle();
  EXPECT_FALSE(supervisor_->RestartPending("a"));
  Advance(milliseconds(60000));
  EXPECT_EQ(backend_.launches().size(), launches);
}

TEST_F(SupervisorTest, ABudgetBreachFreezesAGuaranteedPause) {
  Register("a");
  StartRunning("a");
  const pid_t agent = backend_.last_agent();
  supervisor_->BudgetAction("a", false, "budget-exceeded{tokens}");
  Settle();
  EXPECT_EQ(StateOf("a"), "paused");
  EXPECT_EQ(CauseOf("a"), "budget-exceeded{tokens}");
  EXPECT_EQ(backend_.SignalsSent(agent, SIGSTOP), 1);
  // A second breach while paused changes nothing.
  supervisor_->BudgetAction("a", false, "budget-exceeded{tokens}");
  EXPECT_EQ(backend_.SignalsSent(agent, SIGSTOP), 1);
}

TEST_F(SupervisorTest, ABudgetPauseThatCannotPauseStopsInstead) {
  Register("a", v1::SUPPORT_LEVEL_UNSUPPORTED);
  StartRunning("a");
  const pid_t agent = backend_.last_agent();
  supervisor_->BudgetAction("a", false, "budget-exceeded{dollars}");
  Settle();
  EXPECT_EQ(backend_.SignalsSent(agent, SIGSTOP), 0);
  EXPECT_EQ(backend_.SignalsSent(agent, SIGTERM), 1);
  EXPECT_EQ(StateOf("a"), "stopped");
  EXPECT_FALSE(supervisor_->RestartPending("a"));  // a breach stop is not restarted
}

TEST_F(SupervisorTest, ABudgetStopOfAPausedAgentThawsItFirst) {
  Register("a");
  StartRunning("a");
  const pid_t agent = backend_.last_agent();
  Outcome paused;
  supervisor_->Pause("a", Record(paused));
  KT_ASSERT_OK(paused.status);
  supervisor_->BudgetAction("a", true, "budget-exceeded{tokens}");
  Settle();
  std::vector<int> sent;
  for (const FakeProcessBackend::Signal& signal : backend_.signals()) {
    EXPECT_EQ(signal.group, agent);
    sent.push_back(signal.signal);
  }
  // SIGKILL last: what an exited agent left in its group goes with it.
  EXPECT_EQ(sent, (std::vector<int>{SIGSTOP, SIGCONT, SIGTERM, SIGKILL}));
  EXPECT_EQ(StateOf("a"), "stopped");
}

TEST_F(SupervisorTest, ABestEffortPauseRunsTheTemplatesAndSaysSo) {
  Register("a", v1::SUPPORT_LEVEL_BEST_EFFORT, "/usr/bin/agent-pause");
  Register("b", v1::SUPPORT_LEVEL_BEST_EFFORT);
  StartRunning("a");
  StartRunning("b");
  Outcome paused;
  supervisor_->Pause("a", Record(paused));
  KT_ASSERT_OK(paused.status);
  EXPECT_EQ(StateOf("a"), "paused");
  EXPECT_EQ(CauseOf("a"), "pause-best-effort");
  EXPECT_EQ(backend_.detached(), std::vector<std::string>{"/usr/bin/agent-pause"});
  // The template runs with its declared environment on top of the safe base.
  ASSERT_EQ(backend_.detached_env().size(), 1u);
  const std::vector<std::string>& env = backend_.detached_env()[0];
  EXPECT_NE(std::find(env.begin(), env.end(), "KT_TEMPLATE=pause"), env.end());
  EXPECT_EQ(backend_.SignalsSent(Row("a").pid.value(), SIGSTOP), 0);
  Outcome resumed;
  supervisor_->Resume("a", Record(resumed));
  KT_ASSERT_OK(resumed.status);
  EXPECT_EQ(StateOf("a"), "running");
  EXPECT_EQ(backend_.detached().back(), "/usr/bin/agent-pause-resume");
  // Without a template the operator is told nothing was sent.
  Outcome untemplated;
  supervisor_->Pause("b", Record(untemplated));
  KT_ASSERT_OK(untemplated.status);
  ASSERT_EQ(untemplated.notices.size(), 2u);
  EXPECT_EQ(untemplated.notices[1],
            "no [lifecycle.pause] template is declared; nothing was sent to the agent");
}

TEST_F(SupervisorTest, PauseOfAnAdapterThatCannotPauseIsRefused) {
  Register("a", v1::SUPPORT_LEVEL_UNSUPPORTED);
  StartRunning("a");
  Outcome paused;
  supervisor_->Pause("a", Record(paused));
  EXPECT_EQ(contract::ErrorReason(paused.status), contract::reason::kCapabilityUnsupported);
  EXPECT_EQ(StateOf("a"), "running");
}

TEST_F(SupervisorTest, ABreachWhileStartingWaitsForRunning) {
  Register("a");
  Outcome started;
  supervisor_->Start("a", Record(started));
  Settle();
  supervisor_->BudgetAction("a", false, "budget-exceeded{tokens}");
  EXPECT_EQ(StateOf("a"), "starting");
  Advance(kReadiness);
  EXPECT_EQ(StateOf("a"), "paused");
  EXPECT_EQ(backend_.SignalsSent(backend_.last_agent(), SIGSTOP), 1);
}

TEST_F(SupervisorTest, AReconcileReadoptsLiveAgentsAndRecordsExitsThatHappenedMeanwhile) {
  Register("alive");
  Register("dead");
  Register("vanished");
  StartRunning("alive");
  StartRunning("dead");
  const pid_t dead = backend_.last_agent();
  StartRunning("vanished");
  const pid_t vanished = backend_.last_agent();
  // The daemon goes away; while it is down one agent exits and one shim vanishes.
  backend_.DropWatches();
  MakeSupervisor();
  backend_.Exit(dead, {ExitRecord::Kind::kExited, 7});
  backend_.Vanish(vanished);
  Settle();
  supervisor_->Reconcile();
  Settle();
  EXPECT_EQ(StateOf("alive"), "running");
  EXPECT_EQ(StateOf("dead"), "failed");
  EXPECT_EQ(CauseOf("dead"), "crashed{exit code 7}");
  EXPECT_EQ(StateOf("vanished"), "failed");
  EXPECT_EQ(CauseOf("vanished").rfind("lost{", 0), 0u) << CauseOf("vanished");
  // The re-adopted agent is watched again: its later exit is seen.
  backend_.Exit(Row("alive").pid.value(), {ExitRecord::Kind::kExited, 0});
  Settle();
  EXPECT_EQ(StateOf("alive"), "stopped");
}

// The daemon died after the shim had started the agent but before the spawn record was
// committed: the next daemon finds the launch through the run dir and supervises it, rather than
// leave it running unsupervised (and start a second copy).
TEST_F(SupervisorTest, AReconcileTakesOnALaunchThePreviousDaemonNeverConfirmed) {
  Register("a");
  StartRunning("a");
  const pid_t agent = backend_.last_agent();
  store::InstanceRow row = Row("a");
  row.state = "starting";
  row.pid.reset();
  row.pid_start_time.reset();
  row.shim_pid.reset();
  row.shim_start_time.reset();
  row.started_at_ms.reset();
  ASSERT_TRUE(store_->UpdateInstance(row).ok());
  backend_.DropWatches();
  MakeSupervisor();
  supervisor_->Reconcile();
  Settle();
  EXPECT_EQ(StateOf("a"), "running");
  EXPECT_GT(Row("a").started_at_ms.value_or(0), 0) << "a running instance without started_at";
  EXPECT_EQ(Row("a").pid.value_or(0), agent);
  EXPECT_EQ(Row("a").shim_pid.value_or(0), agent + 1);
  EXPECT_EQ(static_cast<int>(backend_.launches().size()), 1) << "a second copy was launched";
  // Watched like any other: its exit is seen.
  backend_.Exit(agent, {ExitRecord::Kind::kExited, 0});
  Settle();
  EXPECT_EQ(StateOf("a"), "stopped");
}

// A crash while no daemon ran is timed by its exit record, not by the reconciliation that finds
// it: the backoff it was owed has passed meanwhile, so the restart comes at once.
TEST_F(SupervisorTest, ACrashWhileNoDaemonRanCountsFromItsExitRecord) {
  Register("a");
  StartRunning("a");
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3});  // streak 1: at once
  Settle();
  Advance(milliseconds(0));
  Advance(kReadiness);
  ASSERT_EQ(StateOf("a"), "running");
  backend_.DropWatches();  // the daemon dies
  Advance(milliseconds(2000));
  // The second crash (streak 2: a 1000 ms backoff), recorded by the shim at this instant.
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3, clock_.NowUnixMs()});
  Advance(milliseconds(5000));
  const size_t launches = backend_.launches().size();
  MakeSupervisor();
  supervisor_->Reconcile();
  Settle();
  Advance(milliseconds(0));
  EXPECT_EQ(backend_.launches().size(), launches + 1) << "waited a backoff that had passed";
  EXPECT_EQ(Row("a").crash_streak, 2);
}

// The daemon dies during an automatic restart's readiness window and the agent exits: the next
// daemon decides that failed start as the policy's own (another restart), not as a plain
// launch error that nobody restarts.
TEST_F(SupervisorTest, AnInterruptedAutomaticRestartStaysThePolicys) {
  Register("a");
  StartRunning("a");
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3});  // restarted at once
  Settle();
  Advance(milliseconds(0));
  ASSERT_EQ(StateOf("a"), "starting");
  ASSERT_EQ(CauseOf("a").rfind("restarted{", 0), 0u) << CauseOf("a");
  backend_.DropWatches();  // the daemon dies; the new run exits within its readiness window
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3});
  MakeSupervisor();
  supervisor_->Reconcile();
  Settle();
  EXPECT_EQ(StateOf("a"), "failed");
  EXPECT_TRUE(supervisor_->RestartPending("a")) << CauseOf("a");
}

// A watched exit is timed when it is seen: its record's (coarse) time never shortens a backoff, so
// `restarted{…,waited_ms}` says the configured delay.
TEST_F(SupervisorTest, AWatchedExitWaitsTheWholeBackoff) {
  Register("a");
  StartRunning("a");
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3});
  Settle();
  Advance(milliseconds(0));
  Advance(kReadiness);
  const size_t launches = backend_.launches().size();
  backend_.Exit(backend_.last_agent(),
                {ExitRecord::Kind::kExited, 3, clock_.NowUnixMs() - 500});  // an old file time
  Settle();
  Advance(milliseconds(999));
  EXPECT_EQ(backend_.launches().size(), launches) << "the backoff was shortened";
  Advance(milliseconds(1));
  ASSERT_EQ(backend_.launches().size(), launches + 1);
  EXPECT_EQ(CauseOf("a"), "restarted{count=2,waited_ms=1000}");
}

// A new daemon cannot know whether config.toml was edited by hand while none ran: it withdraws
// the grant a re-adopted run's shim holds, so the next restart delivers the config afresh.
TEST_F(SupervisorTest, AReAdoptedRunsRespawnGrantIsWithdrawn) {
  Register("a");
  const std::string run_dir = Supervisor::RunDir(Row("a").home);
  StartRunning("a");
  ASSERT_TRUE(backend_.GrantIn(run_dir).has_value());
  backend_.DropWatches();
  MakeSupervisor();
  supervisor_->Reconcile();
  Settle();
  EXPECT_EQ(StateOf("a"), "running");
  EXPECT_FALSE(backend_.GrantIn(run_dir).has_value()) << "a stale grant survived re-adoption";
  // The next crash is the daemon's restart, which grants again once the new run is up.
  backend_.Exit(backend_.last_agent(), {ExitRecord::Kind::kExited, 3});
  Settle();
  Advance(milliseconds(0));
  Advance(kReadiness);
  EXPECT_EQ(StateOf("a"), "running");
  EXPECT_TRUE(backend_.GrantIn(run_dir).has_value());
}

// A pause or resume commits before it signals: a daemon that died in between left the group
// unlike its stored state. The next daemon makes the state true again on re-adoption.
TEST_F(SupervisorTest, ReAdoptionReappliesThePauseStateItFinds) {
  Register("frozen");
  Register("thawed");
  Register("soft", v1::SUPPORT_LEVEL_BEST_EFFORT);
  StartRunning("frozen");
  const pid_t frozen = backend_.last_agent();
  StartRunning("thawed");
  const pid_t thawed = backend_.last_agent();
  StartRunning("soft");
  const pid_t soft = backend_.last_agent();
  Outcome paused;
  supervisor_->Pause("frozen", Record(paused));
  Outcome soft_paused;
  supervisor_->Pause("soft", Record(soft_paused));
  Settle();
  ASSERT_EQ(StateOf("frozen"), "paused");
  ASSERT_EQ(StateOf("soft"), "paused");
  const int stops = backend_.SignalsSent(frozen, SIGSTOP);
  const int conts = backend_.SignalsSent(thawed, SIGCONT);
  backend_.DropWatches();
  MakeSupervisor();
  supervisor_->Reconcile();
  Settle();
  EXPECT_EQ(StateOf("frozen"), "paused");
  EXPECT_EQ(backend_.SignalsSent(frozen, SIGSTOP), stops + 1) << "a paused group not re-frozen";
  EXPECT_EQ(backend_.SignalsSent(frozen, SIGCONT), 0);
  EXPECT_EQ(backend_.SignalsSent(thawed, SIGCONT), conts + 1) << "a running group not thawed";
  EXPECT_EQ(backend_.SignalsSent(thawed, SIGSTOP), 0);
  EXPECT_EQ(backend_.SignalsSent(soft, SIGSTOP), 0) << "a best-effort pause frozen by signal";
  EXPECT_EQ(backend_.SignalsSent(soft, SIGCONT), 0);
}

// Respawn in place: while running, the shim holds a grant for exactly the exits the policy
// restarts at once; a relaunch under it is recorded as the supervisor's own restart would be.
TEST_F(SupervisorTest, ARunningRunGrantsItsShimTheImmediateRestartAndARelaunchIsRecorded) {
  Register("a");
  const std::string run_dir = Supervisor::RunDir(Row("a").home);
  Outcome started;
  supervisor_->Start("a", Record(started));
  Settle();
  EXPECT_FALSE(backend_.GrantIn(run_dir).has_value()) << "granted while still starting";
  Advance(kReadiness);
  std::optional<FakeProcessBackend::RespawnGrant> grant = backend_.GrantIn(run_dir);
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->crash_after_ms, 0);   // streak 0: any crash restarts at once
  EXPECT_EQ(grant->clean_after_ms, -1);  // on-failure: a clean exit is not restarted
  const pid_t first = backend_.last_agent();
  const pid_t shim = Row("a").shim_pid.value_or(0);
  transitions_.clear();
  const pid_t second = backend_.ExitUnderGrant(first, {ExitRecord::Kind::kSignaled, SIGKILL}, 5000);
  ASSERT_GT(second, 0);
  Settle();
  EXPECT_EQ(backend_.launches().size(), 1U) << "the supervisor launched a shim of its own";
  EXPECT_EQ(transitions_, (std::vector<std::string>{"a:failed", "a:starting"}));
  EXPECT_EQ(StateOf("a"), "starting");
  EXPECT_EQ(CauseOf("a"), "restarted{count=1,waited_ms=0}");
  EXPECT_EQ(Row("a").pid.value_or(0), second);
  EXPECT_EQ(Row("a").shim_pid.value_or(0), shim);
  EXPECT_EQ(Row("a").last_exit, "signal 9 (SIGKILL)");
  EXPECT_EQ(Row("a").restart_count, 1);
  EXPECT_EQ(Row("a").restarts_total, 1);
  EXPECT_EQ(Row("a").crash_streak, 1);
  EXPECT_EQ(Row("a").current_run, 2);
  Advance(kReadiness);
  EXPECT_EQ(StateOf("a"), "running");
  // Streak 1: the next crash restarts at once only after a run that ends the streak.
  grant = backend_.GrantIn(run_dir);
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->crash_after_ms, settings_.restart.reset_after_ms);
  // Not covered: the shim ends, and the supervisor restarts with backoff as before.
  backend_.ExitUnderGrant(second, {ExitRecord::Kind::kExited, 3}, 10);
  Settle();
  EXPECT_EQ(StateOf("a"), "failed");
  EXPECT_TRUE(supervisor_->RestartPending("a"));
  Advance(milliseconds(settings_.restart.backoff_initial_ms));
  EXPECT_EQ(backend_.launches().size(), 2U);
}

TEST_F(SupervisorTest, TheGrantFollowsThePolicy) {
  Register("never");
  Register("always");
  settings_.restart.policy = RestartPolicyKind::kNever;
  StartRunning("never");
  EXPECT_FALSE(backend_.GrantIn(Supervisor::RunDir(Row("never").home)).has_value());
  settings_.restart.policy = RestartPolicyKind::kAlways;
  StartRunning("always");
  std::optional<FakeProcessBackend::RespawnGrant> grant =
      backend_.GrantIn(Supervisor::RunDir(Row("always").home));
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->clean_after_ms, 1000);  // the respawn floor
  EXPECT_EQ(grant->crash_after_ms, 0);
}

TEST_F(SupervisorTest, StopsAndConfigChangesTakeTheGrantBack) {
  Register("a");
  Register("b");
  StartRunning("a");
  StartRunning("b");
  const std::string run_a = Supervisor::RunDir(Row("a").home);
  const std::string run_b = Supervisor::RunDir(Row("b").home);
  supervisor_->ConfigChanged("a");
  EXPECT_FALSE(backend_.GrantIn(run_a).has_value());
  EXPECT_TRUE(backend_.GrantIn(run_b).has_value());
  supervisor_->ConfigChanged("");  // a secret: anyone may use it
  EXPECT_FALSE(backend_.GrantIn(run_b).has_value());
  // A config change means the next start is the daemon's: the crash is restarted the slow way.
  backend_.ExitUnderGrant(Row("a").pid.value(), {ExitRecord::Kind::kSignaled, SIGKILL}, 5000);
  Settle();
  Advance(milliseconds(0));
  EXPECT_EQ(backend_.launches().size(), 3U);
  Advance(kReadiness);
  ASSERT_TRUE(backend_.GrantIn(run_a).has_value());  // granted again for the new run
  Outcome stopped;
  supervisor_->Stop("a", 5, Record(stopped));
  EXPECT_FALSE(backend_.GrantIn(run_a).has_value()) << "signalled with the grant in place";
  Settle();
  EXPECT_EQ(StateOf("a"), "stopped");
}

// The agent crashed on its own as a stop began, and the shim had read the grant before the
// supervisor took it back: the relaunched agent is killed, and the stop ends as asked.
TEST_F(SupervisorTest, ARelaunchRacingAStopIsKilled) {
  Register("a");
  StartRunning("a");
  const std::string run_dir = Supervisor::RunDir(Row("a").home);
  backend_.set_exits_on_sigterm(false);
  Outcome stopped;
  supervisor_->Stop("a", 30, Record(stopped));
  Settle();
  ASSERT_EQ(StateOf("a"), "stopping");
  KT_ASSERT_OK(backend_.GrantRespawn(run_dir, {0, -1, ""}));  // as the shim read it
  const pid_t relaunched =
      backend_.ExitUnderGrant(Row("a").pid.value(), {ExitRecord::Kind::kSignaled, SIGSEGV}, 5000);
  ASSERT_GT(relaunched, 0);
  Settle();
  EXPECT_GE(backend_.SignalsSent(relaunched, SIGKILL), 1);
  EXPECT_EQ(StateOf("a"), "stopped");
  ASSERT_TRUE(stopped.called);
  KT_EXPECT_OK(stopped.status);
  EXPECT_EQ(backend_.launches().size(), 1U);
}

// A stop that finds a relaunch not yet recorded kills it and signals it, not the old pid (which
// may be reused by now) — also when the store refuses to record the relaunched pid.
TEST_F(SupervisorTest, AStopMeetingAnUnrecordedRelaunchSignalsItEvenWhenTheStoreRefuses) {
  Register("a");
  StartRunning("a");
  const pid_t first = Row("a").pid.value();
  backend_.set_exits_on_sigterm(false);
  backend_.set_exits_on_sigkill(false);  // the kill lands later: the stop must still aim right
  const pid_t relaunched =
      backend_.ExitUnderGrant(first, {ExitRecord::Kind::kSignaled, SIGSEGV}, 5000);
  ASSERT_GT(relaunched, 0);  // recorded by the shim; the daemon has not read it (no Settle)
  fault_after_ = "a:stopping";
  Outcome stopped;
  supervisor_->Stop("a", 30, Record(stopped));
  EXPECT_GE(backend_.SignalsSent(relaunched, SIGKILL), 1);
  EXPECT_GE(backend_.SignalsSent(relaunched, SIGTERM), 1);
  EXPECT_EQ(backend_.SignalsSent(first, SIGTERM), 0);
  EXPECT_EQ(backend_.SignalsSent(first, SIGKILL), 0);
  EXPECT_EQ(Row("a").pid.value_or(0), first) << "the store took a write it should have refused";
}

// The shim relaunched the agent while no daemon was up: the next daemon records the restart.
TEST_F(SupervisorTest, AReconcileRecordsARelaunchMadeWhileTheDaemonWasDown) {
  Register("a");
  StartRunning("a");
  const pid_t shim = Row("a").shim_pid.value_or(0);
  backend_.DropWatches();
  MakeSupervisor();
  const pid_t relaunched =
      backend_.ExitUnderGrant(Row("a").pid.value(), {ExitRecord::Kind::kExited, 2}, 5000);
  ASSERT_GT(relaunched, 0);
  supervisor_->Reconcile();
  Settle();
  EXPECT_EQ(StateOf("a"), "starting");
  EXPECT_EQ(CauseOf("a"), "restarted{count=1,waited_ms=0}");
  EXPECT_EQ(Row("a").pid.value_or(0), relaunched);
  EXPECT_EQ(Row("a").shim_pid.value_or(0), shim);
  Advance(kReadiness);
  EXPECT_EQ(StateOf("a"), "running");
  EXPECT_EQ(backend_.launches().size(), 1U);
  // Watched again, relaunch and exit alike.
  backend_.Exit(relaunched, {ExitRecord::Kind::kExited, 0});
  Settle();
  EXPECT_EQ(StateOf("a"), "stopped");
}

// Only the shim writes the relaunch record, whole: a damaged one changes nothing, but is logged.
TEST_F(SupervisorTest, AnUnreadableRelaunchRecordChangesNothingAndIsLogged) {
  Register("a");
  StartRunning("a");
  const store::InstanceRow before = Row("a");
  transitions_.clear();
  backend_.DamageRelaunchRecord(before.pid.value());
  Settle();
  EXPECT_TRUE(transitions_.empty());
  EXPECT_EQ(StateOf("a"), "running");
  EXPECT_EQ(Row("a").pid, before.pid);
  EXPECT_EQ(Row("a").current_run, before.current_run);
  EXPECT_EQ(Row("a").restart_count, before.restart_count);
  EXPECT_NE(log_.str().find("relaunch record ignored instance=a"), std::string::npos) << log_.str();
  // Consumed: the next look finds nothing, and the run goes on being watched.
  backend_.Exit(before.pid.value(), {ExitRecord::Kind::kExited, 0});
  Settle();
  EXPECT_EQ(StateOf("a"), "stopped");
}

// The relaunched run also ended while the daemon was down: it was a run like any other (its
// start is the shim's stamp), not a launch that failed inside its readiness window.
TEST_F(SupervisorTest, ARelaunchedRunThatEndedWhileTheDaemonWasDownIsAnOrdinaryRun) {
  const pid_t relaunched = RelaunchedWhileNoDaemonRuns({ExitRecord::Kind::kSignaled, SIGKILL});
  ASSERT_GT(relaunched, 0);
  clock_.Advance(milliseconds(10000));
  backend_.Exit(relaunched, {ExitRecord::Kind::kExited, 0});
  transitions_.clear();
  supervisor_->Reconcile();
  Settle();
  EXPECT_EQ(transitions_,
            (std::vector<std::string>{"a:failed", "a:starting", "a:running", "a:stopped"}));
  EXPECT_EQ(StateOf("a"), "stopped");
  EXPECT_EQ(CauseOf("a"), "exited");
  EXPECT_EQ(Row("a").restart_count, 1);
}

// ... but a relaunched run whose exit record falls inside its readiness window was a start that
// failed, as it would have been read with a daemon watching: never `running` (adapter-ready).
TEST_F(SupervisorTest, ARelaunchThatDiedWithinItsWindowWhileTheDaemonWasDownIsALaunchError) {
  const pid_t relaunched = RelaunchedWhileNoDaemonRuns({ExitRecord::Kind::kExited, 4});
  ASSERT_GT(relaunched, 0);
  backend_.Exit(relaunched, {ExitRecord::Kind::kExited, 5, clock_.NowUnixMs() + 40});
  clock_.Advance(milliseconds(10000));
  transitions_.clear();
  supervisor_->Reconcile();
  Settle();
  EXPECT_EQ(transitions_, (std::vector<std::string>{"a:failed", "a:starting", "a:failed"}));
  EXPECT_EQ(CauseOf("a"),
            "launch-error{'/usr/bin/agent' exited within the readiness window: exit code 5}");
  EXPECT_EQ(Row("a").restart_count, 1);
}

TEST_F(SupervisorTest, NoGrantWithoutAWatchOrAfterAConfigEditUntilTheNextLaunch) {
  Register("unwatched");
  backend_.set_run_dirs_watchable(false);
  StartRunning("unwatched");
  EXPECT_FALSE(backend_.GrantIn(Supervisor::RunDir(Row("unwatched").home)).has_value());
  backend_.set_run_dirs_watchable(true);

  Register("edited");
  const std::string run_dir = Supervisor::RunDir(Row("edited").home);
  Outcome started;
  supervisor_->Start("edited", Record(started));
  Settle();
  supervisor_->ConfigChanged("edited");  // while starting: there is no grant yet to take back
  Advance(kReadiness);
  ASSERT_EQ(StateOf("edited"), "running");
  EXPECT_FALSE(backend_.GrantIn(run_dir).has_value()) << "granted with a stale configuration";
  // The crash goes through the supervisor, whose launch delivers the edit; then the grant is back.
  backend_.ExitUnderGrant(Row("edited").pid.value(), {ExitRecord::Kind::kExited, 1}, 5000);
  Settle();
  Advance(milliseconds(0));
  Advance(kReadiness);
  ASSERT_EQ(StateOf("edited"), "running");
  EXPECT_TRUE(backend_.GrantIn(run_dir).has_value());
}

TEST_F(SupervisorTest, CommandsThatDoNotFitTheStateAreRefusedAndChangeNothing) {
  Register("a");
  Outcome stopped;
  supervisor_->Stop("a", std::nullopt, Record(stopped));
  ASSERT_TRUE(stopped.called);
  EXPECT_EQ(contract::ErrorReason(stopped.status), contract::reason::kInvalidTransition);
  Outcome missing;
  supervisor_->Start("nope", Record(missing));
  EXPECT_EQ(contract::ErrorReason(missing.status), contract::reason::kNotFound);
  EXPECT_EQ(StateOf("a"), "registered");
  EXPECT_TRUE(backend_.signals().empty());
  EXPECT_TRUE(transitions_.empty());
}

}  // namespace
}  // namespace ktesio::daemon::supervisor
