#pragma once

// In-memory companion of one instance's stored row: pending waiters and timers. Private to the
// supervisor.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "supervisor/supervisor.h"

namespace ktesio::daemon::supervisor {

struct Supervisor::Runtime {
  explicit Runtime(boost::asio::io_context& io)
      : ready_timer(io), stop_timer(io), confirm_timer(io), restart_timer(io), record_timer(io) {}

  // Bumped at every launch; callbacks carrying an older generation are stale and ignored.
  uint64_t generation = 0;
  std::vector<Done> start_waiters;
  std::vector<Done> stop_waiters;
  std::vector<std::string> start_notices;
  std::vector<std::string> stop_notices;
  boost::asio::steady_timer ready_timer;
  boost::asio::steady_timer stop_timer;
  boost::asio::steady_timer confirm_timer;
  boost::asio::steady_timer restart_timer;
  bool kill_sent = false;
  uint32_t stop_window_s = 0;
  bool restart_pending = false;
  int64_t restart_delay_ms = 0;
  bool automatic_start = false;  // the current launch came from the restart policy
  // An end of run whose commit failed and is being retried (RecordEnd): commands are refused.
  boost::asio::steady_timer record_timer;
  bool end_unrecorded = false;
  int record_attempts = 0;
  // A budget breach seen while still starting: acted on as soon as the instance is running.
  std::optional<std::pair<bool, std::string>> pending_budget;  // (stop, cause)
};

}  // namespace ktesio::daemon::supervisor
