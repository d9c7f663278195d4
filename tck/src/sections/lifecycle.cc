// Section lifecycle: start, stop (the process — in subject mode every process of the agent — is
// gone), the transition events, a crash leg and a stop escalation leg.

#include <unistd.h>

#include <thread>

#include "kit_internal.h"
#include "ktesio/contract/status_macros.h"
#include "process_tree.h"

namespace ktesio::tck::internal {

namespace {

// "" when `transitions` (prior, new) start from registered and go through starting, running,
// stopping and stopped in that order; else why not.
std::string TransitionProblem(const std::vector<std::pair<std::string, std::string>>& transitions) {
  const std::vector<std::string> want = {"starting", "running", "stopping", "stopped"};
  std::string seen;
  size_t next = 0;
  for (const auto& [prior, now] : transitions) {
    seen += (seen.empty() ? "" : ",") + prior + "->" + now;
    if (next < want.size() && now == want[next]) {
      ++next;
    }
  }
  if (transitions.empty() || transitions.front().first != "registered" || next != want.size()) {
    return "transition events do not show registered->starting->running->stopping->stopped "
           "(seen: " +
           (seen.empty() ? std::string("none") : seen) + ")";
  }
  return "";
}

}  // namespace

absl::StatusOr<Kit::Outcome> Kit::Lifecycle() {
  const std::string name = NewName("lifecycle");
  KT_RETURN_IF_ERROR(RegisterAgent(name, {"--heartbeat-ms", "1000"}));
  KT_ASSIGN_OR_RETURN(const v1::AgentInstance running, StartRunning(name));
  const long long pid = running.pid();
  // Subject mode: every process the subject's own program runs must be gone after the stop
  // (no descendant of the agent may survive it), not only the one the engine launched.
  std::vector<ProcInfo> processes;
  if (subject_mode()) {
    processes = AgentProcesses(pid);
  }
  KT_RETURN_IF_ERROR(Stop(name));
  v1::AgentInstance after;
  if (!deadline_->WaitFor(
          [&] {
            auto got = Get(name);
            if (got) {
              after = *got;
            }
            return got && got->state() == v1::AGENT_STATE_STOPPED;
          },
          milliseconds(10000))) {
    return Outcome{kFail, "after stop the state is " + StateName(after.state()) + ", not stopped"};
  }
  if (!deadline_->WaitFor([&] { return ProcessGone(pid); }, milliseconds(5000))) {
    return Outcome{kFail, "the agent pid " + std::to_string(pid) + " is still alive after stop"};
  }
  for (const ProcInfo& p : processes) {
    if (!deadline_->WaitFor([&] { return ProcessGone(p.pid); }, milliseconds(5000))) {
      return Outcome{kFail, Name(p) + ", a process of the agent (pid " + std::to_string(pid) +
                                "), is still alive 5 s after the stop"};
    }
  }
  if (std::string problem = TransitionProblem(Transitions(name, "stopped")); !problem.empty()) {
    return Outcome{kFail, problem};
  }
  KT_ASSIGN_OR_RETURN(const Outcome crash, LifecycleCrashLeg());
  if (crash.first != kPass) {
    return crash;
  }
  return LifecycleEscalationLeg();
}

// An unrequested exit with restart.policy=never ends in failed, no restart. The probe crashes
// on request in both modes: an arbitrary program cannot be made to crash, and this leg tests the
// engine's crash handling under the subject's declaration.
absl::StatusOr<Kit::Outcome> Kit::LifecycleCrashLeg() {
  const std::string crash = NewName("lifecycle");
  KT_RETURN_IF_ERROR(RegisterProbe(crash, {"--crash-after-ms", "500", "--exit-code", "3"}));
  KT_RETURN_IF_ERROR(SetConfig(crash, "restart.policy", "never"));
  v1::StartAgentResponse started;
  grpc::Status status = Start(crash, &started);
  if (!status.ok()) {
    return Outcome{kFail, "StartAgent (crash leg) failed: " + Describe(status)};
  }
  v1::AgentInstance failed;
  if (!deadline_->WaitFor(
          [&] {
            auto got = Get(crash);
            if (got) {
              failed = *got;
            }
            return got && got->state() == v1::AGENT_STATE_FAILED;
          },
          milliseconds(10000))) {
    return Outcome{kFail, "crash leg: the crashing probe did not end in failed (state " +
                              StateName(failed.state()) + ", cause '" + failed.cause() + "')"};
  }
  std::string cause = failed.failed_cause().empty() ? failed.cause() : failed.failed_cause();
  if (cause.find("crashed") == std::string::npos) {
    return Outcome{kFail, "crash leg: failed with cause '" + cause + "', expected crashed{...}"};
  }
  // Give a (wrong) restart a moment to show up before checking the count.
  std::this_thread::sleep_for(milliseconds(1500));
  KT_ASSIGN_OR_RETURN(const v1::AgentInstance later, GetInstance(crash));
  if (later.restart_count() != 0 || later.state() != v1::AGENT_STATE_FAILED) {
    return Outcome{kFail, "crash leg: restart.policy=never but restart_count is " +
                              std::to_string(later.restart_count()) + " and state " +
                              StateName(later.state())};
  }
  return Outcome{kPass, ""};
}

// A stop escalates: an agent still alive when the graceful window ends is killed with its whole
// group, and the stop says it was forced. The probe ignores SIGTERM for this, in both modes (an
// arbitrary program cannot be made to outlive its stop); its synthesized manifest declares no
// stop template, so the graceful phase is SIGTERM.
absl::StatusOr<Kit::Outcome> Kit::LifecycleEscalationLeg() {
  const std::string name = NewName("lifecycle");
  // `running` means the process started, not that it ignores SIGTERM yet: the probe writes its
  // pid file after it set that up, and the stop waits for the file.
  const std::string pid_file = "/tmp/" + name + ".pid";
  unlink(pid_file.c_str());
  KT_RETURN_IF_ERROR(
      RegisterProbe(name, {"--ignore-sigterm", "--pid-file", pid_file, "--heartbeat-ms", "1000"}));
  KT_ASSIGN_OR_RETURN(const v1::AgentInstance running, StartRunning(name));
  const long long pid = running.pid();
  const bool ready =
      deadline_->WaitFor([&] { return access(pid_file.c_str(), F_OK) == 0; }, milliseconds(10000));
  unlink(pid_file.c_str());
  if (!ready) {
    return Outcome{kFail, "stop escalation leg: the probe (pid " + std::to_string(pid) +
                              ") did not write its pid file within 10 s of running"};
  }
  v1::StopAgentRequest request;
  request.set_name(name);
  request.set_timeout_seconds(1);
  v1::StopAgentResponse stopped;
  const grpc::Status status = agents_->StopAgent(Ctx(milliseconds(15000)).get(), request, &stopped);
  if (!status.ok()) {
    return Outcome{kFail,
                   "stop escalation leg: StopAgent (1 s window, the probe ignoring "
                   "SIGTERM) failed: " +
                       Describe(status)};
  }
  const v1::AgentInstance& after = stopped.instance();
  if (after.state() != v1::AGENT_STATE_STOPPED) {
    return Outcome{kFail,
                   "stop escalation leg: after a 1 s stop of an agent ignoring SIGTERM the "
                   "state is " +
                       StateName(after.state()) + " (cause '" + after.cause() + "'), not stopped"};
  }
  if (after.cause().find("stop-forced") == std::string::npos) {
    return Outcome{kFail,
                   "stop escalation leg: an agent ignoring SIGTERM was stopped with cause '" +
                       after.cause() + "', expected stop-forced{...}"};
  }
  if (!deadline_->WaitFor([&] { return ProcessGone(pid); }, milliseconds(5000))) {
    return Outcome{kFail, "stop escalation leg: the agent pid " + std::to_string(pid) +
                              " ignoring SIGTERM is still alive 5 s after its forced stop"};
  }
  return Outcome{kPass, ""};
}

}  // namespace ktesio::tck::internal
