#include "supervisor/restart_policy.h"

#include "gtest/gtest.h"

namespace ktesio::daemon::supervisor {
namespace {

TEST(RestartPolicy, OnFailureBackoffSequenceAndCrashLoop) {
  RestartSettings settings;  // on-failure, 1 s doubling to 60 s, 5 consecutive
  int64_t streak = 0;
  const int64_t expected_delays[] = {0, 1000, 2000, 4000};
  for (int64_t expected : expected_delays) {
    RestartDecision d = DecideRestart(settings, {false, 10, streak});
    EXPECT_TRUE(d.restart);
    EXPECT_EQ(d.delay_ms, expected) << "streak " << streak;
    EXPECT_FALSE(d.crash_loop);
    streak = d.crash_streak;
  }
  RestartDecision fifth = DecideRestart(settings, {false, 10, streak});
  EXPECT_FALSE(fifth.restart);
  EXPECT_TRUE(fifth.crash_loop);
  EXPECT_EQ(fifth.crash_streak, 5);
}

// What a new daemon owes an instance at rest is exactly the delay DecideRestart gave its end.
TEST(RestartPolicy, AnOwedRestartHasTheDelayItsCrashWasGiven) {
  RestartSettings settings;  // on-failure, 1 s doubling, 5 consecutive
  int64_t streak = 0;
  for (int crash = 0; crash < 4; ++crash) {
    const RestartDecision d = DecideRestart(settings, {false, 10, streak});
    streak = d.crash_streak;
    EXPECT_EQ(OwedRestartDelay(settings, streak), std::optional<int64_t>(d.delay_ms));
  }
  EXPECT_FALSE(OwedRestartDelay(settings, 5).has_value()) << "a crash loop";
  EXPECT_FALSE(OwedRestartDelay(settings, 0).has_value()) << "cancelled by an operator stop";
  settings.policy = RestartPolicyKind::kNever;
  EXPECT_FALSE(OwedRestartDelay(settings, 1).has_value());
}

TEST(RestartPolicy, BackoffIsCapped) {
  RestartSettings settings;
  settings.max_consecutive = 100;
  settings.backoff_max_ms = 60000;
  RestartDecision d = DecideRestart(settings, {false, 0, 40});
  EXPECT_EQ(d.delay_ms, 60000);
  EXPECT_TRUE(d.restart);
}

TEST(RestartPolicy, HealthyRunResetsTheStreak) {
  RestartSettings settings;
  RestartDecision d = DecideRestart(settings, {false, 60000, 4});
  EXPECT_TRUE(d.restart);
  EXPECT_EQ(d.delay_ms, 0);  // first crash after a healthy run: at once
  EXPECT_EQ(d.crash_streak, 1);
  RestartDecision short_run = DecideRestart(settings, {false, 59999, 1});
  EXPECT_EQ(short_run.delay_ms, 1000);
}

TEST(RestartPolicy, PolicyTable) {
  struct Case {
    RestartPolicyKind policy;
    bool clean;
    bool restart;
  };
  const Case cases[] = {
      {RestartPolicyKind::kNever, false, false},    {RestartPolicyKind::kNever, true, false},
      {RestartPolicyKind::kOnFailure, false, true}, {RestartPolicyKind::kOnFailure, true, false},
      {RestartPolicyKind::kAlways, false, true},    {RestartPolicyKind::kAlways, true, true},
  };
  for (const Case& c : cases) {
    RestartSettings settings;
    settings.policy = c.policy;
    RestartDecision d = DecideRestart(settings, {c.clean, 10, 0});
    EXPECT_EQ(d.restart, c.restart) << RestartPolicyName(c.policy) << " clean=" << c.clean;
    if (c.clean) {
      EXPECT_EQ(d.crash_streak, 0);
    } else {
      EXPECT_EQ(d.crash_streak, 1);
    }
  }
}

TEST(RestartPolicy, AlwaysKeepsARespawnFloorForQuickCleanExits) {
  RestartSettings settings;
  settings.policy = RestartPolicyKind::kAlways;
  EXPECT_EQ(DecideRestart(settings, {true, 10, 0}).delay_ms, 990);
  EXPECT_EQ(DecideRestart(settings, {true, 1000, 0}).delay_ms, 0);
  EXPECT_EQ(DecideRestart(settings, {true, 5000, 0}).delay_ms, 0);
  settings.policy = RestartPolicyKind::kOnFailure;
  EXPECT_FALSE(DecideRestart(settings, {true, 10, 0}).restart);
}

TEST(RestartPolicy, NamesParse) {
  for (RestartPolicyKind p :
       {RestartPolicyKind::kNever, RestartPolicyKind::kOnFailure, RestartPolicyKind::kAlways}) {
    auto parsed = ParseRestartPolicy(RestartPolicyName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_FALSE(ParseRestartPolicy("sometimes").ok());
}

}  // namespace
}  // namespace ktesio::daemon::supervisor
