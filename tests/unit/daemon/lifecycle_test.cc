#include "supervisor/lifecycle.h"

#include <map>
#include <set>

#include "gtest/gtest.h"
#include "ktesio/contract/error.h"

namespace ktesio::daemon::supervisor {
namespace {

// The complete command table of product.md §4; every pair not listed must be rejected.
const std::map<std::pair<State, Command>, State> kExpectedCommands = {
    {{State::kRegistered, Command::kStart}, State::kStarting},
    {{State::kStopped, Command::kStart}, State::kStarting},
    {{State::kFailed, Command::kStart}, State::kStarting},
    {{State::kRunning, Command::kStop}, State::kStopping},
    {{State::kPaused, Command::kStop}, State::kStopping},
    {{State::kRunning, Command::kPause}, State::kPaused},
    {{State::kPaused, Command::kResume}, State::kRunning},
};

TEST(Lifecycle, EveryStateCommandPairExhaustively) {
  int allowed = 0;
  for (State state : kAllStates) {
    for (Command command : kAllCommands) {
      auto expected = kExpectedCommands.find({state, command});
      std::optional<State> target = CommandTarget(state, command);
      absl::Status check = CheckCommand(state, command);
      if (expected == kExpectedCommands.end()) {
        EXPECT_FALSE(target.has_value()) << StateName(state) << " " << CommandName(command);
        EXPECT_EQ(check.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_EQ(contract::ErrorReason(check), "INVALID_TRANSITION");
        EXPECT_EQ(std::string(check.message()), "cannot " + CommandName(command) +
                                                    " an Agent Instance while it is '" +
                                                    StateName(state) + "'");
      } else {
        ++allowed;
        EXPECT_EQ(target, expected->second) << StateName(state) << " " << CommandName(command);
        EXPECT_TRUE(check.ok());
      }
    }
  }
  EXPECT_EQ(allowed, 7);
}

TEST(Lifecycle, TheSpecExampleMessage) {
  EXPECT_EQ(std::string(CheckCommand(State::kRegistered, Command::kStop).message()),
            "cannot stop an Agent Instance while it is 'registered'");
}

TEST(Lifecycle, EventEdgesExhaustively) {
  const std::map<std::pair<State, Event>, State> expected = {
      {{State::kStarting, Event::kReady}, State::kRunning},
      {{State::kStarting, Event::kLaunchError}, State::kFailed},
      {{State::kStopping, Event::kStopped}, State::kStopped},
      {{State::kRunning, Event::kCrashed}, State::kFailed},
      {{State::kPaused, Event::kCrashed}, State::kFailed},
      {{State::kRunning, Event::kExited}, State::kStopped},
      {{State::kPaused, Event::kExited}, State::kStopped},
      {{State::kFailed, Event::kRestarted}, State::kStarting},
      {{State::kStopped, Event::kRestarted}, State::kStarting},
      {{State::kRunning, Event::kBudgetPause}, State::kPaused},
      {{State::kRunning, Event::kBudgetStop}, State::kStopping},
      {{State::kPaused, Event::kBudgetStop}, State::kStopping},
      {{State::kStarting, Event::kLost}, State::kFailed},
      {{State::kRunning, Event::kLost}, State::kFailed},
      {{State::kPaused, Event::kLost}, State::kFailed},
      {{State::kStopping, Event::kLost}, State::kFailed},
      {{State::kStopping, Event::kStopAbandoned}, State::kFailed},
  };
  const Event all_events[] = {Event::kReady,        Event::kLaunchError, Event::kStopped,
                              Event::kCrashed,      Event::kExited,      Event::kRestarted,
                              Event::kBudgetPause,  Event::kBudgetStop,  Event::kLost,
                              Event::kStopAbandoned};
  for (State state : kAllStates) {
    for (Event event : all_events) {
      auto it = expected.find({state, event});
      std::optional<State> target = EventTarget(state, event);
      if (it == expected.end()) {
        EXPECT_FALSE(target.has_value())
            << StateName(state) << " event " << static_cast<int>(event);
      } else {
        EXPECT_EQ(target, it->second) << StateName(state) << " event " << static_cast<int>(event);
      }
    }
  }
}

TEST(Lifecycle, StateNamesRoundTrip) {
  std::set<std::string> names;
  for (State state : kAllStates) {
    names.insert(StateName(state));
    EXPECT_EQ(ParseState(StateName(state)), state);
  }
  EXPECT_EQ(names, (std::set<std::string>{"registered", "starting", "running", "paused", "stopping",
                                          "stopped", "failed"}));
  EXPECT_FALSE(ParseState("Running").has_value());
}

TEST(Lifecycle, LiveAndTerminal) {
  for (State state : kAllStates) {
    EXPECT_NE(IsLive(state), IsTerminal(state));
  }
  EXPECT_TRUE(IsTerminal(State::kRegistered));
  EXPECT_TRUE(IsTerminal(State::kStopped));
  EXPECT_TRUE(IsTerminal(State::kFailed));
  EXPECT_TRUE(IsLive(State::kStopping));
}

}  // namespace
}  // namespace ktesio::daemon::supervisor
