// Status, text and /proc helpers shared by the kit's sections, and the section clock.

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "kit_internal.h"
#include "ktesio/contract/toml_text.h"
#include "ktesio/v1/common.pb.h"

namespace ktesio::tck::internal {

std::string Str(std::string_view s) { return std::string(s); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string ErrorReason(const grpc::Status& status) {
  v1::ErrorDetail detail;
  if (!status.error_details().empty() && detail.ParseFromString(status.error_details())) {
    return detail.reason();
  }
  return "";
}

static std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK:
      return "OK";
    case grpc::CANCELLED:
      return "CANCELLED";
    case grpc::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::INTERNAL:
      return "INTERNAL";
    case grpc::UNAVAILABLE:
      return "UNAVAILABLE";
    default:
      return "code " + std::to_string(static_cast<int>(code));
  }
}

std::string Describe(const grpc::Status& status) {
  std::string reason = ErrorReason(status);
  return CodeName(status.error_code()) + (reason.empty() ? "" : "/" + reason) + ": " +
         status.error_message();
}

absl::Status RpcFailed(const grpc::Status& status, std::string_view doing) {
  // absl::StatusCode and grpc::StatusCode share their numbering.
  const auto code =
      status.ok() ? absl::StatusCode::kUnknown : static_cast<absl::StatusCode>(status.error_code());
  return absl::Status(code, std::string(doing) + " failed: " + Describe(status));
}

std::string StateName(v1::AgentState state) {
  std::string name = v1::AgentState_Name(state);
  const std::string prefix = "AGENT_STATE_";
  if (name.rfind(prefix, 0) == 0) {
    name = name.substr(prefix.size());
  }
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return name;
}

std::string LevelName(v1::SupportLevel level) {
  switch (level) {
    case v1::SUPPORT_LEVEL_UNSUPPORTED:
      return "unsupported";
    case v1::SUPPORT_LEVEL_BEST_EFFORT:
      return "best-effort";
    case v1::SUPPORT_LEVEL_GUARANTEED:
      return "guaranteed";
    default:
      return "unspecified";
  }
}

v1::SupportLevel ToProto(c::SupportLevel level) {
  switch (level) {
    case c::SupportLevel::kUnsupported:
      return v1::SUPPORT_LEVEL_UNSUPPORTED;
    case c::SupportLevel::kBestEffort:
      return v1::SUPPORT_LEVEL_BEST_EFFORT;
    case c::SupportLevel::kGuaranteed:
      return v1::SUPPORT_LEVEL_GUARANTEED;
  }
  return v1::SUPPORT_LEVEL_UNSPECIFIED;
}

// "pause.linux = \"unsupported\" (declared)" or "pause.linux: no entry (projects to unsupported)".
std::string QuoteDeclared(const c::AdapterDeclaration& d, c::Capability capability, c::Os os) {
  std::string key = Str(c::CapabilityName(capability)) + "." + Str(c::OsName(os));
  if (!d.capabilities.HasEntry(capability, os)) {
    return key + ": no entry (projects to unsupported)";
  }
  return key + " = \"" + Str(c::SupportLevelName(d.capabilities.Project(capability, os))) +
         "\" (declared)";
}

// /proc/<pid>/stat state letter, or 0 when the process is gone.
char ProcState(long long pid) {
  std::string text = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) {
    return 0;
  }
  return text[paren + 2];
}

bool ProcessGone(long long pid) {
  if (pid <= 0) {
    return true;
  }
  if (kill(static_cast<pid_t>(pid), 0) != 0) {
    return true;
  }
  char state = ProcState(pid);
  return state == 0 || state == 'Z' || state == 'X';
}

std::string TomlString(const std::string& s) { return ::ktesio::contract::QuoteTomlString(s); }

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) {
    out += (out.empty() ? "" : "; ") + p;
  }
  return out;
}

std::chrono::system_clock::time_point Deadline::Rpc(milliseconds cap) const {
  auto left = std::chrono::duration_cast<milliseconds>(end_ - Clock::now());
  if (left < milliseconds(200)) {
    left = milliseconds(200);
  }
  return std::chrono::system_clock::now() + std::min(left, cap);
}

bool Deadline::WaitFor(const std::function<bool()>& condition, milliseconds cap) const {
  const auto end = std::min(end_, Clock::now() + cap);
  while (true) {
    if (condition()) {
      return true;
    }
    if (Clock::now() >= end) {
      return false;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

}  // namespace ktesio::tck::internal
