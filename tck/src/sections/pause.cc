// Section pause: per the declared level on this OS (real freeze, best-effort qualifier, or a
// fail-fast refusal).

#include "kit_internal.h"

namespace ktesio::tck::internal {

Kit::Outcome Kit::Pause() {
  const c::Os here = c::CurrentOs();
  const c::SupportLevel level = d_.capabilities.Project(c::Capability::kPause, here);
  const std::string quoted = QuoteDeclared(d_, c::Capability::kPause, here);
  const std::string name = NewName("pause");
  MustRegisterProbe(name, {"--heartbeat-ms", "1000"});
  v1::AgentInstance running = MustStartRunning(name);
  const long long pid = running.pid();
  v1::PauseAgentRequest pause;
  pause.set_name(name);
  v1::PauseAgentResponse paused;
  grpc::Status status = agents_->PauseAgent(Ctx().get(), pause, &paused);
  if (level == c::SupportLevel::kUnsupported) {
    if (status.ok()) return {kFail, "PauseAgent succeeded although " + quoted};
    if (status.error_code() != grpc::FAILED_PRECONDITION ||
        ErrorReason(status) != "CAPABILITY_UNSUPPORTED") {
      return {kFail, "PauseAgent refused with " + Describe(status) +
                         ", expected FAILED_PRECONDITION/CAPABILITY_UNSUPPORTED"};
    }
    return {kNotApplicable, quoted + "; PauseAgent fails fast with CAPABILITY_UNSUPPORTED"};
  }
  if (!status.ok())
    return {kFail, "PauseAgent failed although " + quoted + ": " + Describe(status)};
  v1::ResumeAgentRequest resume;
  resume.set_name(name);
  v1::ResumeAgentResponse resumed;
  if (level == c::SupportLevel::kGuaranteed) {
    if (!deadline_->WaitFor([&] { return ProcState(pid) == 'T'; }, milliseconds(5000))) {
      return {kFail, std::string("paused with ") + quoted + " but /proc/" + std::to_string(pid) +
                         "/stat shows state '" + ProcState(pid) + "', not 'T' (stopped)"};
    }
    status = agents_->ResumeAgent(Ctx().get(), resume, &resumed);
    if (!status.ok()) return {kFail, "ResumeAgent failed: " + Describe(status)};
    if (!deadline_->WaitFor([&] { return ProcState(pid) != 'T'; }, milliseconds(5000))) {
      return {kFail, "after ResumeAgent the agent is still stopped ('T')"};
    }
    return {kPass, ""};
  }
  v1::AgentInstance instance = MustGet(name);
  if (instance.state() != v1::AGENT_STATE_PAUSED ||
      instance.cause().find("pause-best-effort") == std::string::npos) {
    return {kFail, "best-effort pause: state " + StateName(instance.state()) + " cause '" +
                       instance.cause() + "', expected paused with cause pause-best-effort"};
  }
  status = agents_->ResumeAgent(Ctx().get(), resume, &resumed);
  if (!status.ok())
    return {kFail, "ResumeAgent after a best-effort pause failed: " + Describe(status)};
  return {kPass, ""};
}

}  // namespace ktesio::tck::internal
