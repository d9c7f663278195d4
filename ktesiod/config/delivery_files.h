#pragma once

// The file effects of start-time delivery, kept apart from the pure planning in delivery.h:
// reading the current `file` targets and writing the planned documents and the
// effective-config.json snapshot into the Agent Home.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/delivery.h"

namespace ktesio::daemon::config {

inline constexpr std::string_view kEffectiveConfigFileName = "effective-config.json";

// Reads each of `relative_paths` (already normalized and lexically inside the home, as
// ValidateDeclaration guarantees) after fs::CheckConfined; paths that do not exist are left out.
// Errors: INVALID_ARGUMENT/CONFIG_INVALID when a symlink escapes the home; INTERNAL/IO_ERROR.
absl::StatusOr<std::map<std::string, std::string>> ReadExistingTargets(
    const std::string& home, const std::vector<std::string>& relative_paths);

// Writes every plan.files document (parents created 0700, files 0600 since they may carry
// secret cleartext) and <home>/effective-config.json (0600), each atomically and each after
// fs::CheckConfined. Stops at the first error; documents already written stay (each is complete).
// Errors: INVALID_ARGUMENT/CONFIG_INVALID when a symlink escapes the home; INTERNAL/IO_ERROR.
absl::Status WriteDeliveredFiles(const std::string& home, const DeliveryPlan& plan);

}  // namespace ktesio::daemon::config
