#pragma once

// In-memory companion of one instance's stored row: pending waiters and timers. Private to the
// supervisor.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "supervisor/supervisor.h"
#include "time/clock.h"

namespace ktesio::daemon::supervisor {

struct Supervisor::Runtime {
  explicit Runtime(time::Clock& clock)
      : ready_timer(clock.NewTimer()),
        stop_timer(clock.NewTimer()),
        confirm_timer(clock.NewTimer()),
        restart_timer(clock.NewTimer()),
        record_timer(clock.NewTimer()) {}

  // Bumped at every launch; callbacks carrying an older generation are stale and ignored.
  uint64_t generation = 0;
  std::vector<Done> start_waiters;
  std::vector<Done> stop_waiters;
  std::vector<std::string> start_notices;
  std::vector<std::string> stop_notices;
  std::unique_ptr<time::Timer> ready_timer;
  std::unique_ptr<time::Timer> stop_timer;
  std::unique_ptr<time::Timer> confirm_timer;
  std::unique_ptr<time::Timer> restart_timer;
  bool kill_sent = false;
  // The last stop ended unconfirmed (SIGKILL did not end the group within 5 s): the instance stays
  // `stopping` with nothing under way until the group exits.
  bool stop_unconfirmed = false;
  uint32_t stop_window_s = 0;
  bool restart_pending = false;
  int64_t restart_delay_ms = 0;
  bool automatic_start = false;  // the current launch came from the restart policy
  // An end of run whose commit failed and is being retried (RecordEnd): commands are refused.
  std::unique_ptr<time::Timer> record_timer;
  bool end_unrecorded = false;
  int record_attempts = 0;
  // Respawn in place: the run dir of the current shim is watched for relaunch records (without
  // it no grant is given), and a config or secret edit since the daemon last launched the agent
  // (a relaunch would start it with the old configuration: no grant until the next launch).
  bool respawn_watched = false;
  bool config_changed = false;
  // A budget breach seen while still starting: acted on as soon as the instance is running.
  std::optional<std::pair<bool, std::string>> pending_budget;  // (stop, cause)
};

}  // namespace ktesio::daemon::supervisor
