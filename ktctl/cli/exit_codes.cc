#include "cli/exit_codes.h"

#include <array>
#include <utility>

namespace ktesio::cli {
namespace {

constexpr std::array<std::pair<std::string_view, int>, 30> kByReason = {{
    {"USAGE", kExitUsage},
    {"INVALID_ARGUMENT", kExitUsage},
    {"INVALID_NAME", kExitUsage},
    {"UNKNOWN_KIND", kExitUsage},
    {"UNKNOWN_CONFIG_KEY", kExitUsage},
    {"CONFIG_INVALID", kExitUsage},
    {"DUPLICATE_NAME", kExitUsage},
    {"UNKNOWN_MEMORY_KIND", kExitUsage},
    {"INVALID_LABEL", kExitUsage},
    {"INVALID_SELECTOR", kExitUsage},
    {"FLEET_INVALID", kExitUsage},
    {"MANIFEST_INVALID", kExitGeneral},
    {"CONTRACT_INCOMPATIBLE", kExitGeneral},
    {"LAUNCH_FAILED", kExitGeneral},
    {"DELIVERY_FAILED", kExitGeneral},
    {"IO_ERROR", kExitGeneral},
    {"STORE_ERROR", kExitGeneral},
    {"INTERNAL", kExitGeneral},
    {"UNIMPLEMENTED", kExitGeneral},
    {"NOT_FOUND", kExitNotFound},
    {"MANIFEST_NOT_FOUND", kExitNotFound},
    {"NO_MATCH", kExitNotFound},
    {"INVALID_TRANSITION", kExitInvalidState},
    {"INVALID_STATE", kExitInvalidState},
    {"STOP_NOT_CONFIRMED", kExitInvalidState},
    {"CAPABILITY_UNSUPPORTED", kExitUnsupported},
    {"TIMED_OUT", kExitTimedOut},
    {"DAEMON_UNREACHABLE", kExitUnreachable},
    {"API_MISMATCH", kExitUnreachable},
    {"SHUTTING_DOWN", kExitUnreachable},
}};

}  // namespace

int ExitCodeFor(std::string_view reason, grpc::StatusCode code) {
  for (const auto& [known, exit_code] : kByReason) {
    if (reason == known) {
      return exit_code;
    }
  }
  switch (code) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::UNAVAILABLE:
      return kExitUnreachable;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return kExitTimedOut;
    case grpc::StatusCode::NOT_FOUND:
      return kExitNotFound;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return kExitUsage;
    default:
      return kExitGeneral;
  }
}

}  // namespace ktesio::cli
