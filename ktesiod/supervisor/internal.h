#pragma once

// Helpers shared by the supervisor's files (supervisor.cc, supervisor_exit.cc,
// supervisor_pause.cc, supervisor_respawn.cc, supervisor_stop.cc). Private to the supervisor.

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ktesio/v1/common.pb.h"

namespace ktesio::daemon::supervisor::internal {

// How long a launched agent stays `starting` before it counts as running.
inline constexpr auto kReadinessWindow = std::chrono::milliseconds(300);

// The declared level on the OS the daemon runs on (built for Linux; another OS would pick its
// own field here).
inline v1::SupportLevel LevelHere(const v1::CapabilityLevels& levels) { return levels.on_linux(); }

inline bool Supported(v1::SupportLevel level) {
  return level == v1::SUPPORT_LEVEL_GUARANTEED || level == v1::SUPPORT_LEVEL_BEST_EFFORT;
}

// Quotes the declaration that makes `capability` unsupported here, for refusal messages.
inline std::string QuoteDeclaration(const std::string& capability, v1::SupportLevel level) {
  if (level == v1::SUPPORT_LEVEL_UNSPECIFIED) {
    return absl::StrCat("the declaration has no ", capability,
                        " entry for linux (a missing entry projects to unsupported)");
  }
  return absl::StrCat("the declaration says ", capability, ".linux = \"unsupported\"");
}

// SafeBaseEnvironment() as NAME=VALUE entries: what every agent and template starts from.
std::vector<std::string> BaseEnvironment();

}  // namespace ktesio::daemon::supervisor::internal
