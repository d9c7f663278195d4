// Section interaction: SendInput reaches the agent's stdin, or fails fast when unsupported.

#include <unistd.h>

#include <atomic>

#include "kit_internal.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::tck::internal {

absl::StatusOr<Kit::Outcome> Kit::Interaction() {
  const c::Os here = c::CurrentOs();
  const c::SupportLevel level = d_.capabilities.Project(c::Capability::kInteraction, here);
  const std::string quoted = QuoteDeclared(d_, c::Capability::kInteraction, here);
  const std::string name = NewName("interaction");
  KT_RETURN_IF_ERROR(RegisterProbe(name, {"--echo"}));
  KT_RETURN_IF_ERROR(StartRunning(name).status());
  static std::atomic<int> n{0};
  const std::string text =
      "tck-echo-" + std::to_string(getpid()) + "-" + std::to_string(n.fetch_add(1));
  v1::SendInputRequest send;
  send.set_name(name);
  send.set_text(text);
  v1::SendInputResponse sent;
  grpc::Status status = agents_->SendInput(Ctx().get(), send, &sent);
  if (level == c::SupportLevel::kUnsupported) {
    if (status.ok()) {
      return Outcome{kFail, "SendInput succeeded although " + quoted};
    }
    if (status.error_code() != grpc::FAILED_PRECONDITION ||
        ErrorReason(status) != "CAPABILITY_UNSUPPORTED") {
      return Outcome{kFail, "SendInput refused with " + Describe(status) +
                                ", expected FAILED_PRECONDITION/CAPABILITY_UNSUPPORTED"};
    }
    return Outcome{kPass, ""};
  }
  if (!status.ok()) {
    return Outcome{kFail, "SendInput failed although " + quoted + ": " + Describe(status)};
  }
  const std::string want = "echo: " + text;
  if (!deadline_->WaitFor([&] { return HasOutputLine(name, want); }, milliseconds(10000))) {
    return Outcome{kFail, "the line sent with SendInput never reached the agent ('" + want +
                              "' not in its captured stdout)"};
  }
  return Outcome{kPass, ""};
}

// Whether `name`'s captured stdout holds the line `want` (false when it cannot be read).
bool Kit::HasOutputLine(const std::string& name, const std::string& want) {
  v1::ReadLogsRequest request;
  request.mutable_filter()->set_name(name);
  request.mutable_filter()->set_stream(v1::LOG_STREAM_AGENT_OUT);
  v1::ReadLogsResponse response;
  if (!logs_->ReadLogs(Ctx(milliseconds(5000)).get(), request, &response).ok()) {
    return false;
  }
  for (const v1::LogLine& line : response.lines()) {
    if (line.text() == want) {
      return true;
    }
  }
  return false;
}

}  // namespace ktesio::tck::internal
