#pragma once

// The restart decision as a pure function (product.md §4), table-tested.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ktesio::daemon::supervisor {

enum class RestartPolicyKind { kNever, kOnFailure, kAlways };

std::string RestartPolicyName(RestartPolicyKind policy);  // "never"|"on-failure"|"always"
absl::StatusOr<RestartPolicyKind> ParseRestartPolicy(std::string_view name);

// Under `always`, a clean exit after a run shorter than this waits out the remainder.
inline constexpr int64_t kRespawnFloorMs = 1000;

struct RestartSettings {
  RestartPolicyKind policy = RestartPolicyKind::kOnFailure;
  int64_t backoff_initial_ms = 1000;
  int64_t backoff_max_ms = 60000;
  int64_t max_consecutive = 5;
  int64_t reset_after_ms = 60000;
};

struct ExitFacts {
  bool clean = false;           // exit code 0
  int64_t run_duration_ms = 0;  // how long the run stayed up
  int64_t crash_streak = 0;     // consecutive crashes before this exit
};

struct RestartDecision {
  bool restart = false;
  int64_t delay_ms = 0;
  int64_t crash_streak = 0;  // the streak after this exit (0 after a clean or healthy run)
  bool crash_loop = false;   // gave up: max_consecutive consecutive crashes
};

// Decides what follows an unrequested exit.
//  - a run that stayed up >= reset_after_ms resets the streak first;
//  - never: no restart; on-failure: restart crashes only; always: restart every exit (a clean
//    exit after a run shorter than kRespawnFloorMs waits out the rest of that second);
//  - the n-th consecutive crash restarts after 0 ms for n = 1, else
//    min(backoff_initial_ms * 2^(n-2), backoff_max_ms);
//  - when the streak reaches max_consecutive, no restart and crash_loop = true.
RestartDecision DecideRestart(const RestartSettings& settings, const ExitFacts& facts);

// The restart a crashed run is owed, for a daemon that finds the instance `failed` (the one that
// recorded the crash died before the restart was due): the delay DecideRestart gave the crash
// (`crash_streak` counts it), counted from the crash, or nullopt when `settings` grant none. A
// crash loop is owed nothing, nor a streak of 0 (an operator stop cancelled the restart).
std::optional<int64_t> OwedRestartDelay(const RestartSettings& settings, int64_t crash_streak);

}  // namespace ktesio::daemon::supervisor
