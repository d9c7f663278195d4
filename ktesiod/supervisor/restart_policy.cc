#include "supervisor/restart_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"

namespace ktesio::daemon::supervisor {

std::string RestartPolicyName(RestartPolicyKind policy) {
  switch (policy) {
    case RestartPolicyKind::kNever:
      return "never";
    case RestartPolicyKind::kOnFailure:
      return "on-failure";
    case RestartPolicyKind::kAlways:
      return "always";
  }
  return "on-failure";
}

absl::StatusOr<RestartPolicyKind> ParseRestartPolicy(std::string_view name) {
  for (RestartPolicyKind policy :
       {RestartPolicyKind::kNever, RestartPolicyKind::kOnFailure, RestartPolicyKind::kAlways}) {
    if (RestartPolicyName(policy) == name) {
      return policy;
    }
  }
  return contract::MakeError(absl::StatusCode::kInvalidArgument, contract::reason::kConfigInvalid,
                             absl::StrCat("restart.policy must be never, on-failure or always, "
                                          "got '",
                                          std::string(name), "'"));
}

namespace {

// The n-th consecutive crash waits 0 ms for n = 1, else min(initial * 2^(n-2), max).
int64_t BackoffFor(const RestartSettings& settings, int64_t streak) {
  if (streak < 2) {
    return 0;
  }
  int64_t delay = settings.backoff_initial_ms;
  for (int64_t i = 2; i < streak && delay < settings.backoff_max_ms; ++i) {
    delay *= 2;
  }
  return std::min(delay, settings.backoff_max_ms);
}

}  // namespace

RestartDecision DecideRestart(const RestartSettings& settings, const ExitFacts& facts) {
  RestartDecision decision;
  int64_t streak = facts.crash_streak;
  if (facts.run_duration_ms >= settings.reset_after_ms) {
    streak = 0;
  }
  if (facts.clean) {
    decision.crash_streak = 0;
    decision.restart = settings.policy == RestartPolicyKind::kAlways;
    // A clean exit is not a crash, but an agent that exits at once must not spin: like s6, keep
    // at least one second between starts.
    if (decision.restart && facts.run_duration_ms < kRespawnFloorMs) {
      decision.delay_ms = kRespawnFloorMs - std::max<int64_t>(facts.run_duration_ms, 0);
    }
    return decision;
  }
  streak += 1;
  decision.crash_streak = streak;
  if (settings.policy == RestartPolicyKind::kNever) {
    return decision;
  }
  if (streak >= settings.max_consecutive) {
    decision.crash_loop = true;
    return decision;
  }
  decision.delay_ms = BackoffFor(settings, streak);
  decision.restart = true;
  return decision;
}

std::optional<int64_t> OwedRestartDelay(const RestartSettings& settings, int64_t crash_streak) {
  if (settings.policy == RestartPolicyKind::kNever || crash_streak < 1 ||
      crash_streak >= settings.max_consecutive) {
    return std::nullopt;
  }
  return BackoffFor(settings, crash_streak);
}

}  // namespace ktesio::daemon::supervisor
