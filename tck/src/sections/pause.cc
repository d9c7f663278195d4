// Section pause: per the declared level on this OS (real freeze, best-effort qualifier, or a
// fail-fast refusal).

#include <thread>

#include "kit_internal.h"
#include "ktesio/contract/status_macros.h"
#include "process_tree.h"

namespace ktesio::tck::internal {

absl::StatusOr<Kit::Outcome> Kit::Pause() {
  const c::Os here = c::CurrentOs();
  const c::SupportLevel level = d_.capabilities.Project(c::Capability::kPause, here);
  const std::string quoted = QuoteDeclared(d_, c::Capability::kPause, here);
  const std::string name = NewName("pause");
  KT_RETURN_IF_ERROR(RegisterAgent(name, {"--heartbeat-ms", "1000"}));
  KT_ASSIGN_OR_RETURN(const v1::AgentInstance running, StartRunning(name));
  // Subject mode: whether the subject writes output on its own, so that a paused subject's
  // output must stop and a resumed one's must start again.
  bool chatty = false;
  if (subject_mode() && level == c::SupportLevel::kGuaranteed) {
    const long long before = OutputLines(name);
    chatty = deadline_->WaitFor([&] { return OutputLines(name) > before; }, milliseconds(2000));
  }
  v1::PauseAgentRequest pause;
  pause.set_name(name);
  v1::PauseAgentResponse paused;
  grpc::Status status = agents_->PauseAgent(Ctx().get(), pause, &paused);
  if (level == c::SupportLevel::kUnsupported) {
    if (status.ok()) {
      return Outcome{kFail, "PauseAgent succeeded although " + quoted};
    }
    if (status.error_code() != grpc::FAILED_PRECONDITION ||
        ErrorReason(status) != "CAPABILITY_UNSUPPORTED") {
      return Outcome{kFail, "PauseAgent refused with " + Describe(status) +
                                ", expected FAILED_PRECONDITION/CAPABILITY_UNSUPPORTED"};
    }
    return Outcome{kNotApplicable, quoted + "; PauseAgent fails fast with CAPABILITY_UNSUPPORTED"};
  }
  if (!status.ok()) {
    return Outcome{kFail, "PauseAgent failed although " + quoted + ": " + Describe(status)};
  }
  if (level == c::SupportLevel::kGuaranteed) {
    return PauseGuaranteed(name, running.pid(), chatty, quoted);
  }
  return PauseBestEffort(name);
}

// Guaranteed and paused: the agent is frozen, and after ResumeAgent runs again (and, when
// `chatty`, writes output again).
Kit::Outcome Kit::PauseGuaranteed(const std::string& name, long long pid, bool chatty,
                                  const std::string& quoted) {
  Outcome frozen = subject_mode() ? SubjectFreeze(name, pid, quoted) : ProbeFreeze(pid, quoted);
  if (frozen.first != kPass) {
    return frozen;
  }
  const long long paused_lines = chatty ? OutputLines(name) : 0;
  v1::ResumeAgentRequest resume;
  resume.set_name(name);
  v1::ResumeAgentResponse resumed;
  grpc::Status status = agents_->ResumeAgent(Ctx().get(), resume, &resumed);
  if (!status.ok()) {
    return Outcome{kFail, "ResumeAgent failed: " + Describe(status)};
  }
  if (!deadline_->WaitFor([&] { return ProcState(pid) != 'T'; }, milliseconds(5000))) {
    return Outcome{kFail, "after ResumeAgent the agent is still stopped ('T')"};
  }
  if (chatty &&
      !deadline_->WaitFor([&] { return OutputLines(name) > paused_lines; }, milliseconds(5000))) {
    return Outcome{kFail,
                   "the subject wrote output before the pause but none within 5 s of resuming"};
  }
  return Outcome{kPass, ""};
}

// Best-effort and paused: the instance is paused with cause pause-best-effort and resumes.
absl::StatusOr<Kit::Outcome> Kit::PauseBestEffort(const std::string& name) {
  KT_ASSIGN_OR_RETURN(const v1::AgentInstance instance, GetInstance(name));
  if (instance.state() != v1::AGENT_STATE_PAUSED ||
      instance.cause().find("pause-best-effort") == std::string::npos) {
    return Outcome{kFail, "best-effort pause: state " + StateName(instance.state()) + " cause '" +
                              instance.cause() + "', expected paused with cause pause-best-effort"};
  }
  v1::ResumeAgentRequest resume;
  resume.set_name(name);
  v1::ResumeAgentResponse resumed;
  grpc::Status status = agents_->ResumeAgent(Ctx().get(), resume, &resumed);
  if (!status.ok()) {
    return Outcome{kFail, "ResumeAgent after a best-effort pause failed: " + Describe(status)};
  }
  return Outcome{kPass, ""};
}

// Guaranteed, probe: the one process the engine launched is stopped ('T').
Kit::Outcome Kit::ProbeFreeze(long long pid, const std::string& quoted) {
  if (!deadline_->WaitFor([&] { return ProcState(pid) == 'T'; }, milliseconds(5000))) {
    return Outcome{kFail, std::string("paused with ") + quoted + " but /proc/" +
                              std::to_string(pid) + "/stat shows state '" + ProcState(pid) +
                              "', not 'T' (stopped)"};
  }
  return Outcome{kPass, ""};
}

// Guaranteed, subject mode: every process of the agent is stopped ('T'), and its captured
// output does not grow over a 2 s window while paused. A process that escaped the agent's
// process group (its own session, e.g. via setsid) keeps running and fails this.
Kit::Outcome Kit::SubjectFreeze(const std::string& name, long long pid, const std::string& quoted) {
  std::vector<ProcInfo> all;
  std::vector<std::string> running;
  auto unfrozen = [&] {
    all = AgentProcesses(pid);
    running.clear();
    for (const ProcInfo& p : all) {
      if (p.state != 'T') {
        running.push_back(Name(p) + " in state '" + std::string(1, p.state) + "'" +
                          (p.pgrp == pid ? std::string()
                                         : " in process group " + std::to_string(p.pgrp) +
                                               ": it escaped the group's SIGSTOP"));
      }
    }
    return all.empty() ? std::string("the agent pid " + std::to_string(pid) + " is gone")
                       : Join(running);
  };
  std::string problem;
  const bool frozen =
      deadline_->WaitFor([&] { return (problem = unfrozen()).empty(); }, milliseconds(5000));
  if (!frozen) {
    return Outcome{kFail, "paused with " + quoted + " but " + std::to_string(running.size()) +
                              " of " + std::to_string(all.size()) +
                              " processes of the agent (process group " + std::to_string(pid) +
                              ") are not stopped: " + problem};
  }
  // Lines the agent wrote just before the freeze may still be on their way into the log.
  std::this_thread::sleep_for(milliseconds(500));
  const long long at_pause = OutputLines(name);
  std::this_thread::sleep_for(milliseconds(2000));
  std::string last;
  const long long later = OutputLines(name, &last);
  if (at_pause >= 0 && later > at_pause) {
    return Outcome{kFail, "paused with " + quoted +
                              " and every process of the agent stopped, but its " +
                              "captured output grew by " + std::to_string(later - at_pause) +
                              " lines in 2 s while paused (last: '" + last + "')"};
  }
  if (std::string after = unfrozen(); !after.empty()) {
    return Outcome{kFail, "paused with " + quoted + " but while paused: " + after};
  }
  return Outcome{kPass, ""};
}

}  // namespace ktesio::tck::internal
