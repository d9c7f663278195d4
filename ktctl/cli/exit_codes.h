#pragma once

// The stable exit codes of ktctl (docs/exit-codes.md), decided in one place from the error
// reason the daemon attached (or, failing that, the gRPC status code).

#include <string_view>

#include "grpcpp/support/status.h"

namespace ktesio::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitGeneral = 1,
  kExitUsage = 2,
  kExitNotFound = 3,
  kExitInvalidState = 4,
  kExitUnsupported = 5,
  kExitTimedOut = 6,
  kExitUnreachable = 7,
};

// Maps a stable reason (e.g. "INVALID_TRANSITION") to its exit code; unknown reasons fall back
// to the gRPC code's mapping.
int ExitCodeFor(std::string_view reason, grpc::StatusCode code);

}  // namespace ktesio::cli
