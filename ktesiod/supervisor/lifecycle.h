#pragma once

// The lifecycle as pure data (product.md §4): command edges an operator may drive and event
// edges the engine takes. Identical for every adapter. No I/O, no clocks.

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ktesio::daemon::supervisor {

enum class State { kRegistered, kStarting, kRunning, kPaused, kStopping, kStopped, kFailed };
inline constexpr State kAllStates[] = {State::kRegistered, State::kStarting, State::kRunning,
                                       State::kPaused,     State::kStopping, State::kStopped,
                                       State::kFailed};

enum class Command { kStart, kStop, kPause, kResume };
inline constexpr Command kAllCommands[] = {Command::kStart, Command::kStop, Command::kPause,
                                           Command::kResume};

enum class Event {
  kReady,          // starting -> running: alive after the readiness window ("adapter-ready")
  kLaunchError,    // starting -> failed ("launch-error")
  kStopped,        // stopping -> stopped ("stop-graceful" | "stop-forced")
  kCrashed,        // running|paused -> failed ("crashed"): unrequested non-zero exit or signal
  kExited,         // running|paused -> stopped ("exited"): unrequested exit 0
  kRestarted,      // failed|stopped -> starting ("restarted"); stopped only under `always`
  kBudgetPause,    // running -> paused ("budget-exceeded")
  kBudgetStop,     // running|paused -> stopping ("budget-exceeded")
  kLost,           // starting|running|paused|stopping -> failed: the process vanished (reboot)
  kStopAbandoned,  // stopping -> failed: the process exited oddly during a stop
};

// "registered", "starting", ... (the wire strings).
std::string StateName(State state);
std::optional<State> ParseState(std::string_view name);
std::string CommandName(Command command);  // "start", "stop", "pause", "resume"

// The target of a command edge, or nullopt when the command is not allowed in `from`.
std::optional<State> CommandTarget(State from, Command command);

// The target of an event edge, or nullopt when the event cannot happen in `from`.
std::optional<State> EventTarget(State from, Event event);

// OK when `command` is allowed in `from`; otherwise FAILED_PRECONDITION with reason
// INVALID_TRANSITION and a message naming the state and command, e.g.
// "cannot stop an Agent Instance while it is 'registered'".
absl::Status CheckCommand(State from, Command command);

// States in which a process may exist (the instance is "live").
bool IsLive(State state);
// States in which the instance is at rest (registered, stopped, failed).
bool IsTerminal(State state);

}  // namespace ktesio::daemon::supervisor
