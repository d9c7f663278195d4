#include "supervisor/lifecycle.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"

namespace ktesio::daemon::supervisor {
namespace {

struct CommandEdge {
  State from;
  Command command;
  State to;
};

constexpr std::array<CommandEdge, 7> kCommandEdges = {{
    {State::kRegistered, Command::kStart, State::kStarting},
    {State::kStopped, Command::kStart, State::kStarting},
    {State::kFailed, Command::kStart, State::kStarting},
    {State::kRunning, Command::kStop, State::kStopping},
    {State::kPaused, Command::kStop, State::kStopping},
    {State::kRunning, Command::kPause, State::kPaused},
    {State::kPaused, Command::kResume, State::kRunning},
}};

struct EventEdge {
  State from;
  Event event;
  State to;
};

constexpr std::array<EventEdge, 17> kEventEdges = {{
    {State::kStarting, Event::kReady, State::kRunning},
    {State::kStarting, Event::kLaunchError, State::kFailed},
    {State::kStopping, Event::kStopped, State::kStopped},
    {State::kRunning, Event::kCrashed, State::kFailed},
    {State::kPaused, Event::kCrashed, State::kFailed},
    {State::kRunning, Event::kExited, State::kStopped},
    {State::kPaused, Event::kExited, State::kStopped},
    {State::kFailed, Event::kRestarted, State::kStarting},
    {State::kStopped, Event::kRestarted, State::kStarting},
    {State::kRunning, Event::kBudgetPause, State::kPaused},
    {State::kRunning, Event::kBudgetStop, State::kStopping},
    {State::kPaused, Event::kBudgetStop, State::kStopping},
    {State::kStarting, Event::kLost, State::kFailed},
    {State::kRunning, Event::kLost, State::kFailed},
    {State::kPaused, Event::kLost, State::kFailed},
    {State::kStopping, Event::kLost, State::kFailed},
    {State::kStopping, Event::kStopAbandoned, State::kFailed},
}};

constexpr std::array<std::pair<State, std::string_view>, 7> kStateNames = {{
    {State::kRegistered, "registered"},
    {State::kStarting, "starting"},
    {State::kRunning, "running"},
    {State::kPaused, "paused"},
    {State::kStopping, "stopping"},
    {State::kStopped, "stopped"},
    {State::kFailed, "failed"},
}};

}  // namespace

std::string StateName(State state) {
  for (const auto& [value, name] : kStateNames) {
    if (value == state) {
      return std::string(name);
    }
  }
  return "unknown";
}

std::optional<State> ParseState(std::string_view name) {
  for (const auto& [value, known] : kStateNames) {
    if (known == name) {
      return value;
    }
  }
  return std::nullopt;
}

std::string CommandName(Command command) {
  switch (command) {
    case Command::kStart:
      return "start";
    case Command::kStop:
      return "stop";
    case Command::kPause:
      return "pause";
    case Command::kResume:
      return "resume";
  }
  return "unknown";
}

std::optional<State> CommandTarget(State from, Command command) {
  for (const CommandEdge& edge : kCommandEdges) {
    if (edge.from == from && edge.command == command) {
      return edge.to;
    }
  }
  return std::nullopt;
}

std::optional<State> EventTarget(State from, Event event) {
  for (const EventEdge& edge : kEventEdges) {
    if (edge.from == from && edge.event == event) {
      return edge.to;
    }
  }
  return std::nullopt;
}

absl::Status CheckCommand(State from, Command command) {
  if (CommandTarget(from, command).has_value()) {
    return absl::OkStatus();
  }
  return contract::MakeError(
      absl::StatusCode::kFailedPrecondition, contract::reason::kInvalidTransition,
      absl::StrCat("cannot ", std::string(CommandName(command)), " an Agent Instance while it is '",
                   std::string(StateName(from)), "'"));
}

bool IsLive(State state) {
  return state == State::kStarting || state == State::kRunning || state == State::kPaused ||
         state == State::kStopping;
}

bool IsTerminal(State state) { return !IsLive(state); }

}  // namespace ktesio::daemon::supervisor
