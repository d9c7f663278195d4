// ShimBackend::UnconfirmedLaunch over a real shim and agent: what a restarted daemon finds in a
// run directory whose launch the previous daemon never confirmed.

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>

#include "absl/status/statusor.h"
#include "backend_test_util.h"
#include "boost/asio/io_context.hpp"
#include "pid_record.h"
#include "process/shim_backend.h"
#include "shim_test_util.h"

namespace ktesio::daemon::shim::testing {
namespace {

pid_t PidIn(const TempDir& dir, const char* file) {
  return std::atoi(ReadFile(dir.run_dir() + "/" + file).value_or("0").c_str());
}

TEST(UnconfirmedLaunch, NamesTheShimRunningThisRunDirAndItsAgent) {
  TempDir dir;
  const auto unix_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t before_ms = unix_ms();
  ShimProcess shim(dir, {{KTESIO_PROBE_PATH, "--heartbeat-ms", "1000"}});
  ASSERT_TRUE(shim.ReadyText().value_or("").starts_with("started "));
  const int64_t after_ms = unix_ms();
  boost::asio::io_context io;
  process::ShimBackend backend(io);
  std::optional<process::Launched> left = backend.UnconfirmedLaunch(dir.run_dir());
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->shim.pid, shim.pid());
  EXPECT_EQ(left->shim.pid, PidIn(dir, "shim.pid"));
  EXPECT_EQ(left->agent.pid, PidIn(dir, "agent.pid"));
  EXPECT_GT(left->agent.start_time, 0);
  // When the shim started (its pid file's time): what the daemon records as the run's start.
  EXPECT_GE(left->started_at_ms, before_ms - 20);  // file times lag by up to a tick
  EXPECT_LE(left->started_at_ms, after_ms);
  EXPECT_TRUE(backend.IsAlive(left->shim));
  EXPECT_TRUE(backend.IsAlive(left->agent));
  // Another run dir is not this shim's, even with the same pid file.
  TempDir other;
  std::ofstream(other.run_dir() + "/shim.pid") << shim.pid() << "\n";
  EXPECT_FALSE(backend.UnconfirmedLaunch(other.run_dir()).has_value());
}

ino_t InodeOf(const std::string& path) {
  struct stat info {};
  return lstat(path.c_str(), &info) == 0 ? info.st_ino : 0;
}

// Each launch clears the previous run's records and the shim rewrites them, all in the same two
// inodes: starting an agent allocates no inode for them (shim/pid_record.h).
TEST(UnconfirmedLaunch, ALaunchRewritesThePidRecordsInPlace) {
  TempDir dir;
  boost::asio::io_context io;
  process::ShimBackend backend(io, BuiltShim);
  absl::StatusOr<process::Launched> first = LaunchProbe(io, backend, dir);
  ASSERT_TRUE(first.ok()) << first.status();
  KillGroupOnExit first_guard{first->agent.pid};
  ASSERT_TRUE(
      WaitUntil([&] { return ReadLog(dir.log_dir()).find("probe started") != std::string::npos; }));
  const std::string shim_file = dir.run_dir() + "/shim.pid";
  const std::string agent_file = dir.run_dir() + "/agent.pid";
  EXPECT_EQ(PidIn(dir, "shim.pid"), first->shim.pid);
  EXPECT_EQ(PidIn(dir, "agent.pid"), first->agent.pid);
  EXPECT_EQ(ReadFile(shim_file).value_or("").size(), 11U);
  const ino_t shim_inode = InodeOf(shim_file);
  const ino_t agent_inode = InodeOf(agent_file);
  ASSERT_NE(shim_inode, 0U);
  ASSERT_NE(agent_inode, 0U);
  ASSERT_EQ(kill(-first->agent.pid, SIGKILL), 0)
      << std::strerror(errno) << "; the log: " << ReadLog(dir.log_dir());
  first_guard.group = 0;  // killed: its pid may belong to someone else from here on
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(dir.run_dir() + "/exit").has_value(); }));
  ASSERT_TRUE(Gone(first->shim.pid));

  absl::StatusOr<process::Launched> second = LaunchProbe(io, backend, dir);
  ASSERT_TRUE(second.ok()) << second.status();
  KillGroupOnExit second_guard{second->agent.pid};
  EXPECT_NE(second->shim.pid, first->shim.pid);
  EXPECT_EQ(PidIn(dir, "shim.pid"), second->shim.pid);
  EXPECT_EQ(PidIn(dir, "agent.pid"), second->agent.pid);
  EXPECT_EQ(InodeOf(shim_file), shim_inode);
  EXPECT_EQ(InodeOf(agent_file), agent_inode);
  EXPECT_FALSE(ReadFile(dir.run_dir() + "/exit").has_value());  // the previous run's exit
  std::optional<process::Launched> left = backend.UnconfirmedLaunch(dir.run_dir());
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->shim.pid, second->shim.pid);
  EXPECT_EQ(left->agent.pid, second->agent.pid);
  ASSERT_EQ(kill(-second->agent.pid, SIGKILL), 0);
  second_guard.group = 0;
  EXPECT_TRUE(Gone(second->shim.pid));
}

TEST(UnconfirmedLaunch, FindsNothingWhenTheShimIsGone) {
  TempDir dir;
  ShimProcess shim(dir, {{KTESIO_PROBE_PATH, "--exit-immediately"}});
  ASSERT_TRUE(shim.Wait().has_value());
  boost::asio::io_context io;
  process::ShimBackend backend(io);
  EXPECT_FALSE(backend.UnconfirmedLaunch(dir.run_dir()).has_value());
  TempDir empty;
  EXPECT_FALSE(backend.UnconfirmedLaunch(empty.run_dir()).has_value());
}

}  // namespace
}  // namespace ktesio::daemon::shim::testing
