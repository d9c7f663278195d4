// Respawn in place: the grant's format and what it covers (directly), and the real shim relaunching
// a real agent under a grant the daemon's process backend wrote, its record read back by the same
// backend — both ends of the files between them, over real processes.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "boost/asio/io_context.hpp"
#include "process/shim_backend.h"
#include "respawn.h"
#include "shim_test_util.h"

namespace ktesio::daemon::shim::testing {
namespace {

const std::string kProbe = KTESIO_PROBE_PATH;

pid_t PidIn(const TempDir& dir, const char* file) {
  return std::atoi(ReadFile(dir.run_dir() + "/" + file).value_or("0").c_str());
}

int Exited(int code) { return code << 8; }  // a wait status as waitpid reports it
int Signaled(int signo) { return signo; }

TEST(RespawnGrant, ParsesTheThreeLines) {
  std::optional<RespawnGrant> grant =
      ParseRespawnGrant("crash_after_ms 0\nclean_after_ms 1000\nusage_file /r/usage-2.log\n");
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->crash_after_ms, 0);
  EXPECT_EQ(grant->clean_after_ms, 1000);
  EXPECT_EQ(grant->usage_file, "/r/usage-2.log");
  grant = ParseRespawnGrant("crash_after_ms -1\nclean_after_ms -1\nusage_file \n");
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->usage_file, "");
}

TEST(RespawnGrant, RefusesAnythingElse) {
  for (const char* text : {
           "",
           "crash_after_ms 0\nclean_after_ms 0\n",                     // a line missing
           "crash_after_ms 0\nclean_after_ms 0\nusage_file x",         // no newline
           "crash_after_ms x\nclean_after_ms 0\nusage_file \n",        // not a number
           "crash_after_ms -2\nclean_after_ms 0\nusage_file \n",       // out of range
           "crash_after_ms 0 \nclean_after_ms 0\nusage_file \n",       // trailing space
           "clean_after_ms 0\ncrash_after_ms 0\nusage_file \n",        // out of order
           "crash_after_ms 0\nclean_after_ms 0\nusage_file \nmore\n",  // extra line
           "crash_after_ms 99999999999999999999\nclean_after_ms 0\nusage_file \n",  // overflow
       }) {
    EXPECT_FALSE(ParseRespawnGrant(text).has_value()) << text;
  }
}

TEST(RespawnGrant, CoversCrashesAndCleanExitsByTheirOwnThresholds) {
  RespawnGrant grant;
  grant.crash_after_ms = 1000;
  grant.clean_after_ms = -1;
  EXPECT_FALSE(GrantCovers(grant, Signaled(SIGKILL), 999));
  EXPECT_TRUE(GrantCovers(grant, Signaled(SIGKILL), 1000));
  EXPECT_TRUE(GrantCovers(grant, Exited(3), 5000));
  EXPECT_FALSE(GrantCovers(grant, Exited(0), 5000));  // clean exits are not covered
  grant.crash_after_ms = -1;
  grant.clean_after_ms = 0;
  EXPECT_FALSE(GrantCovers(grant, Exited(1), 5000));
  EXPECT_TRUE(GrantCovers(grant, Exited(0), 0));
}

// The daemon's side: grant, then read what the shim recorded.
class RespawnTest : public ::testing::Test {
 protected:
  // True when the run dir holds no relaunch record (and reading found nothing unreadable).
  bool NoRecord(const std::string& run_dir) {
    absl::StatusOr<std::optional<process::Respawned>> taken = backend_.TakeRespawned(run_dir);
    return taken.ok() && !taken->has_value();
  }

  boost::asio::io_context io_;
  process::ShimBackend backend_{io_};
};

TEST_F(RespawnTest, TheShimRelaunchesACoveredCrashOnceAndRecordsIt) {
  TempDir dir;
  const std::string usage1 = dir.run_dir() + "/usage-1.log";
  const std::string usage2 = dir.run_dir() + "/usage-2.log";
  ShimProcess shim(
      dir, {{kProbe, "--usage-lines", "1", "--heartbeat-ms", "1000"}, {"--usage-file", usage1}});
  ASSERT_TRUE(shim.ReadyText().value_or("").starts_with("started "));
  const pid_t first = PidIn(dir, "agent.pid");
  ASSERT_GT(first, 1);
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(usage1).value_or("").empty(); }));
  ASSERT_TRUE(backend_.GrantRespawn(dir.run_dir(), {0, -1, usage2}).ok());

  ASSERT_EQ(kill(first, SIGKILL), 0);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(dir.run_dir() + "/respawned").has_value(); }));
  absl::StatusOr<std::optional<process::Respawned>> taken = backend_.TakeRespawned(dir.run_dir());
  ASSERT_TRUE(taken.ok()) << taken.status();
  std::optional<process::Respawned> respawned = *taken;
  ASSERT_TRUE(respawned.has_value());
  EXPECT_EQ(respawned->exit.kind, process::ExitRecord::Kind::kSignaled);
  EXPECT_EQ(respawned->exit.value, SIGKILL);
  EXPECT_GE(respawned->run_ms, 0);
  EXPECT_GT(respawned->started_at_ms, 0);
  const pid_t second = respawned->agent.pid;
  EXPECT_NE(second, first);
  EXPECT_EQ(second, PidIn(dir, "agent.pid"));
  EXPECT_GT(respawned->agent.start_time, 0);
  EXPECT_TRUE(backend_.IsAlive(respawned->agent));  // pid and start time, as the shim read them
  EXPECT_EQ(ProcStat(second, 1), std::to_string(shim.pid()));  // the same shim's child
  EXPECT_EQ(ProcStat(second, 3), std::to_string(second));      // leading its own group
  // Read once; the grant is spent; no exit record, the shim runs on.
  EXPECT_TRUE(NoRecord(dir.run_dir()));
  EXPECT_FALSE(ReadFile(dir.run_dir() + "/respawn").has_value());
  EXPECT_FALSE(ReadFile(dir.run_dir() + "/exit").has_value());
  EXPECT_FALSE(IsDead(shim.pid()));
  // The relaunched run's usage goes to the copy the grant named; the first run's stays whole.
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(usage2).value_or("").empty(); }));
  EXPECT_EQ(SplitLines(ReadFile(usage1).value_or("")).size(), 1U);
  EXPECT_EQ(SplitLines(ReadFile(usage2).value_or("")).size(), 1U);

  // No grant left: the next crash ends the shim with an exit record, as without respawning.
  ASSERT_EQ(kill(second, SIGKILL), 0);
  std::optional<int> status = shim.Wait();
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_EQ(ReadFile(dir.run_dir() + "/exit").value_or(""), "signaled 9\n");
  EXPECT_TRUE(NoRecord(dir.run_dir()));
}

TEST_F(RespawnTest, AnExitTheGrantDoesNotCoverEndsTheShim) {
  TempDir dir;
  // Crashes are covered only after a minute's run; clean exits not at all.
  ShimProcess shim(dir, {{kProbe, "--heartbeat-ms", "1000"}});
  ASSERT_TRUE(shim.ReadyText().value_or("").starts_with("started "));
  ASSERT_TRUE(backend_.GrantRespawn(dir.run_dir(), {60000, -1, ""}).ok());
  ASSERT_EQ(kill(PidIn(dir, "agent.pid"), SIGKILL), 0);
  ASSERT_TRUE(shim.Wait().has_value());
  EXPECT_EQ(ReadFile(dir.run_dir() + "/exit").value_or(""), "signaled 9\n");
  EXPECT_TRUE(NoRecord(dir.run_dir()));

  TempDir clean;
  ShimProcess quitter(
      clean, {{kProbe, "--heartbeat-ms", "1000", "--stop-marker", clean.run_dir() + "/stopped"}});
  ASSERT_TRUE(quitter.ReadyText().value_or("").starts_with("started "));
  ASSERT_TRUE(backend_.GrantRespawn(clean.run_dir(), {0, -1, ""}).ok());
  // With a stop marker, the probe exits 0 on SIGTERM (once it is up).
  ASSERT_TRUE(WaitUntil(
      [&] { return ReadLog(clean.log_dir()).find("probe started") != std::string::npos; }));
  ASSERT_EQ(kill(PidIn(clean, "agent.pid"), SIGTERM), 0);
  ASSERT_TRUE(quitter.Wait().has_value());
  EXPECT_EQ(ReadFile(clean.run_dir() + "/exit").value_or(""), "exited 0\n");
}

TEST_F(RespawnTest, AWithdrawnGrantIsNotUsed) {
  TempDir dir;
  ShimProcess shim(dir, {{kProbe, "--heartbeat-ms", "1000"}});
  ASSERT_TRUE(shim.ReadyText().value_or("").starts_with("started "));
  EXPECT_FALSE(backend_.WithdrawRespawn(dir.run_dir()));  // none given yet
  ASSERT_TRUE(backend_.GrantRespawn(dir.run_dir(), {0, 0, ""}).ok());
  EXPECT_TRUE(backend_.WithdrawRespawn(dir.run_dir()));
  ASSERT_EQ(kill(PidIn(dir, "agent.pid"), SIGKILL), 0);
  ASSERT_TRUE(shim.Wait().has_value());
  EXPECT_EQ(ReadFile(dir.run_dir() + "/exit").value_or(""), "signaled 9\n");
}

TEST_F(RespawnTest, AMalformedGrantOrRecordIsIgnored) {
  TempDir dir;
  ShimProcess shim(dir, {{kProbe, "--heartbeat-ms", "1000"}});
  ASSERT_TRUE(shim.ReadyText().value_or("").starts_with("started "));
  std::ofstream(dir.run_dir() + "/respawn") << "crash_after_ms 0\nbogus\n";
  ASSERT_EQ(kill(PidIn(dir, "agent.pid"), SIGKILL), 0);
  ASSERT_TRUE(shim.Wait().has_value());
  EXPECT_EQ(ReadFile(dir.run_dir() + "/exit").value_or(""), "signaled 9\n");
  for (const char* record : {
           "signaled 9\nrun_ms 5\npid 42\n",  // the start lines missing
           "signaled 9\nrun_ms x\npid 42\nstart_time 1\nstarted_at_ms 1\n",
           "bogus 9\nrun_ms 5\npid 42\nstart_time 1\nstarted_at_ms 1\n",
           "signaled 9\nrun_ms 5\npid 1\nstart_time 1\nstarted_at_ms 1\n",
           "signaled 9\nrun_ms 5\npid 99999999999\nstart_time 1\nstarted_at_ms 1\n",
           "signaled 9\nrun_ms 5\nstart_time 1\npid 42\nstarted_at_ms 1\n",
       }) {
    std::ofstream(dir.run_dir() + "/respawned") << record;
    absl::StatusOr<std::optional<process::Respawned>> taken = backend_.TakeRespawned(dir.run_dir());
    ASSERT_FALSE(taken.ok()) << record;
    EXPECT_EQ(taken.status().code(), absl::StatusCode::kDataLoss);
    const std::string message(taken.status().message());
    EXPECT_NE(message.find("is malformed"), std::string::npos) << message;
    EXPECT_EQ(message.find("run_ms"), std::string::npos) << message;  // the text is not echoed
    // Consumed all the same: the next look finds nothing.
    EXPECT_TRUE(NoRecord(dir.run_dir()));
  }
  // Not readable at all (a directory in its place): also an error, also removed.
  ASSERT_EQ(mkdir((dir.run_dir() + "/respawned").c_str(), 0700), 0);
  absl::StatusOr<std::optional<process::Respawned>> unreadable =
      backend_.TakeRespawned(dir.run_dir());
  ASSERT_FALSE(unreadable.ok());
  EXPECT_EQ(unreadable.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(unreadable.status().message()).find("could not be read"), std::string::npos)
      << unreadable.status();
  EXPECT_FALSE(std::filesystem::exists(dir.run_dir() + "/respawned"));
  EXPECT_TRUE(NoRecord(dir.run_dir()));
  // The run dir is the agent's to write: a FIFO in a record's place (no writer: an open for
  // reading would block the daemon) is refused at once, like any unreadable record.
  ASSERT_EQ(mkfifo((dir.run_dir() + "/respawned").c_str(), 0600), 0);
  absl::StatusOr<std::optional<process::Respawned>> fifo = backend_.TakeRespawned(dir.run_dir());
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.status().code(), absl::StatusCode::kDataLoss);
  std::filesystem::remove(dir.run_dir() + "/exit");
  ASSERT_EQ(mkfifo((dir.run_dir() + "/exit").c_str(), 0600), 0);
  EXPECT_FALSE(backend_.ReadExit(dir.run_dir()).has_value());
}

}  // namespace
}  // namespace ktesio::daemon::shim::testing
