// ShimBackend::UnconfirmedLaunch over a real shim and agent: what a restarted daemon finds in a
// run directory whose launch the previous daemon never confirmed.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "boost/asio/io_context.hpp"
#include "process/shim_backend.h"
#include "shim_test_util.h"

namespace ktesio::daemon::shim::testing {
namespace {

pid_t PidIn(const TempDir& dir, const char* file) {
  return std::atoi(ReadFile(dir.run_dir() + "/" + file).value_or("0").c_str());
}

TEST(UnconfirmedLaunch, NamesTheShimRunningThisRunDirAndItsAgent) {
  TempDir dir;
  ShimProcess shim(dir, {{KTESIO_PROBE_PATH, "--heartbeat-ms", "1000"}});
  ASSERT_TRUE(shim.ReadyText().value_or("").starts_with("started "));
  boost::asio::io_context io;
  process::ShimBackend backend(io);
  std::optional<process::Launched> left = backend.UnconfirmedLaunch(dir.run_dir());
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->shim.pid, shim.pid());
  EXPECT_EQ(left->shim.pid, PidIn(dir, "shim.pid"));
  EXPECT_EQ(left->agent.pid, PidIn(dir, "agent.pid"));
  EXPECT_GT(left->agent.start_time, 0);
  EXPECT_TRUE(backend.IsAlive(left->shim));
  EXPECT_TRUE(backend.IsAlive(left->agent));
  // Another run dir is not this shim's, even with the same pid file.
  TempDir other;
  std::ofstream(other.run_dir() + "/shim.pid") << shim.pid() << "\n";
  EXPECT_FALSE(backend.UnconfirmedLaunch(other.run_dir()).has_value());
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
