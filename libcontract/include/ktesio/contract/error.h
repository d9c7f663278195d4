#pragma once

// Stable machine reasons carried by every Ktesio error.
//
// A reason travels with an absl::Status as a payload, survives the trip over gRPC (the daemon
// copies it into the status details) and decides the CLI exit code. Reasons are part of the
// frozen API surface: new ones may be added, existing spellings never change.

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ktesio::contract {

// The payload type URL under which the reason string is stored on an absl::Status.
inline constexpr std::string_view kReasonPayloadUrl = "type.ktesio.dev/ktesio.v1.ErrorReason";

namespace reason {
inline constexpr std::string_view kManifestInvalid = "MANIFEST_INVALID";
inline constexpr std::string_view kManifestNotFound = "MANIFEST_NOT_FOUND";
inline constexpr std::string_view kContractIncompatible = "CONTRACT_INCOMPATIBLE";
inline constexpr std::string_view kInvalidArgument = "INVALID_ARGUMENT";
inline constexpr std::string_view kInvalidName = "INVALID_NAME";
inline constexpr std::string_view kUnknownKind = "UNKNOWN_KIND";
inline constexpr std::string_view kDuplicateName = "DUPLICATE_NAME";
inline constexpr std::string_view kNotFound = "NOT_FOUND";
inline constexpr std::string_view kInvalidTransition = "INVALID_TRANSITION";
inline constexpr std::string_view kInvalidState = "INVALID_STATE";
inline constexpr std::string_view kCapabilityUnsupported = "CAPABILITY_UNSUPPORTED";
inline constexpr std::string_view kUnknownConfigKey = "UNKNOWN_CONFIG_KEY";
inline constexpr std::string_view kConfigInvalid = "CONFIG_INVALID";
inline constexpr std::string_view kLaunchFailed = "LAUNCH_FAILED";
inline constexpr std::string_view kStopNotConfirmed = "STOP_NOT_CONFIRMED";
inline constexpr std::string_view kTimedOut = "TIMED_OUT";
inline constexpr std::string_view kPermissionDenied = "PERMISSION_DENIED";
inline constexpr std::string_view kLimitReached = "LIMIT_REACHED";
inline constexpr std::string_view kStoreError = "STORE_ERROR";
inline constexpr std::string_view kIoError = "IO_ERROR";
inline constexpr std::string_view kUnimplemented = "UNIMPLEMENTED";
inline constexpr std::string_view kInternal = "INTERNAL";
inline constexpr std::string_view kDeliveryFailed = "DELIVERY_FAILED";
inline constexpr std::string_view kInvalidLabel = "INVALID_LABEL";
inline constexpr std::string_view kInvalidSelector = "INVALID_SELECTOR";
inline constexpr std::string_view kNoMatch = "NO_MATCH";
inline constexpr std::string_view kFleetInvalid = "FLEET_INVALID";
inline constexpr std::string_view kShuttingDown = "SHUTTING_DOWN";  // the daemon is stopping
}  // namespace reason

// Builds a status with `code`, `message` and the stable `reason` attached as a payload.
absl::Status MakeError(absl::StatusCode code, std::string_view reason, std::string_view message);

// Returns the reason attached by MakeError, or "" when the status carries none (or is OK).
std::string ErrorReason(const absl::Status& status);

}  // namespace ktesio::contract
