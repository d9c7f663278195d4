#pragma once

// The files of respawn in place (docs/shim.md), shared by the shim and the daemon's process
// backend so that both read and write one format. Standard library only: the shim includes it.

#include <cstdint>
#include <string>

namespace ktesio::daemon::shim {

// The run dir's grant file (the daemon writes it) and relaunch record (the shim writes it).
inline constexpr const char* kRespawnGrantFile = "respawn";
inline constexpr const char* kRespawnedFile = "respawned";

// Which exits the shim may answer by relaunching the agent itself. Good for one relaunch.
struct RespawnGrant {
  int64_t crash_after_ms = -1;  // a crash of a run at least this long is covered; -1: none is
  int64_t clean_after_ms = -1;  // likewise an exit with code 0
  std::string usage_file;       // the relaunched run's usage copy ("" none)
};

// The grant file's text: "crash_after_ms N\nclean_after_ms N\nusage_file PATH\n".
inline std::string FormatRespawnGrant(const RespawnGrant& grant) {
  return "crash_after_ms " + std::to_string(grant.crash_after_ms) + "\nclean_after_ms " +
         std::to_string(grant.clean_after_ms) + "\nusage_file " + grant.usage_file + "\n";
}

}  // namespace ktesio::daemon::shim
