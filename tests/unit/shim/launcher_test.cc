// The shim launcher: its wire format, and real shims forked by a real `ktesio-shim --launcher`
// through the daemon's ShimBackend (docs/shim.md "The launcher").

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "backend_test_util.h"
#include "boost/asio/io_context.hpp"
#include "launcher_protocol.h"
#include "process/shim_backend.h"
#include "shim_test_util.h"

namespace ktesio::daemon::shim::testing {
namespace {

using std::string_literals::operator""s;

std::vector<std::string_view> Views(const std::vector<std::string>& values) {
  return {values.begin(), values.end()};
}

TEST(LauncherProtocol, CarriesArgumentsAndEnvironmentWhole) {
  const std::vector<std::string> argv = {"/x/ktesio-shim", "--run-dir", "/r u n", "", "--", "a b"};
  const std::vector<std::string> env = {"A=1", "EMPTY=", "SPACE=x y"};
  const std::string message = EncodeLaunchRequest(argv, env);
  std::vector<std::string_view> got_argv;
  std::vector<std::string_view> got_env;
  ASSERT_TRUE(DecodeLaunchRequest(message, &got_argv, &got_env));
  EXPECT_EQ(got_argv, Views(argv));
  EXPECT_EQ(got_env, Views(env));
  // No environment at all is a valid request too.
  const std::string no_env = EncodeLaunchRequest(argv, {});
  ASSERT_TRUE(DecodeLaunchRequest(no_env, &got_argv, &got_env));
  EXPECT_TRUE(got_env.empty());
}

TEST(LauncherProtocol, RefusesAnythingButExactlyTheAnnouncedStrings) {
  const std::string good = EncodeLaunchRequest({"shim", "--run-dir", "/r"}, {"A=1"});
  std::vector<std::string_view> argv;
  std::vector<std::string_view> env;
  std::string bad_magic = good;
  bad_magic[0] ^= 1;
  std::string huge_count = good;
  const uint32_t count = 0xffffffffU;
  std::memcpy(huge_count.data() + 4, &count, sizeof(count));
  const std::vector<std::string> bad = {
      "",
      good.substr(0, 11),                // a header cut short
      bad_magic,                         //
      good.substr(0, good.size() - 1),   // the last string without its NUL
      good + "x"s + '\0',                // one string more than announced
      huge_count,                        // more strings than bytes
      EncodeLaunchRequest({}, {"A=1"}),  // no arguments at all
  };
  for (const std::string& message : bad) {
    EXPECT_FALSE(DecodeLaunchRequest(message, &argv, &env)) << absl::CEscape(message);
  }
}

TEST(LauncherProtocol, AnArgumentWithANulIsCutThereAsExecWouldCutIt) {
  std::vector<std::string_view> argv;
  std::vector<std::string_view> env;
  const std::string message = EncodeLaunchRequest({"shim", "a\0b"s}, {});
  ASSERT_TRUE(DecodeLaunchRequest(message, &argv, &env));
  EXPECT_EQ(argv, (std::vector<std::string_view>{"shim", "a"}));
}

TEST(LauncherProtocol, TheTitleMustShowTheRunDir) {
  const std::vector<std::string> argv = {"/s", "--run-dir", "/run", "--log-dir", "/l"};
  // "/s\0--run-dir\0/run\0": 3 + 10 + 5 bytes; the arguments after the run dir may be cut.
  EXPECT_TRUE(LaunchTitleFits(Views(argv), 3 + 10 + 5));
  EXPECT_FALSE(LaunchTitleFits(Views(argv), 3 + 10 + 4));
  const std::vector<std::string> no_run_dir = {"/s", "--log-dir", "/l"};
  EXPECT_FALSE(LaunchTitleFits(Views(no_run_dir), 4096));
  EXPECT_FALSE(LaunchTitleFits(Views({"/s", "--run-dir"}), 4096));
}

// The NUL-separated command line of `pid`.
std::string CmdlineOf(pid_t pid) {
  return ReadFile(absl::StrCat("/proc/", pid, "/cmdline")).value_or("");
}

TEST(ShimLauncher, ForksShimsThatLookAndRunAsExecdOnes) {
  TempDir dir;
  boost::asio::io_context io;
  process::ShimBackend backend(io, BuiltShim);
  absl::StatusOr<process::Launched> launched =
      LaunchProbe(io, backend, dir, {"--print-env", "KT_LAUNCHER_VAR", "--heartbeat-ms", "1000"},
                  {"KT_LAUNCHER_VAR=from the request", "PATH=/usr/bin:/bin"});
  ASSERT_TRUE(launched.ok()) << launched.status();
  KillGroupOnExit guard{launched->agent.pid};
  // Forked by the launcher, the daemon's (here: this test's) child.
  const pid_t launcher = ParentOf(launched->shim.pid);
  ASSERT_NE(launcher, getpid());
  EXPECT_EQ(ParentOf(launcher), getpid());
  EXPECT_TRUE(CmdlineOf(launcher).starts_with(KTESIO_SHIM_PATH + "\0--launcher\0"s));
  // The shim's command line is its own, which is what a restarted daemon recognises it by.
  const std::string cmdline = CmdlineOf(launched->shim.pid);
  EXPECT_TRUE(cmdline.starts_with(KTESIO_SHIM_PATH + "\0--run-dir\0"s + dir.run_dir() +
                                  "\0--log-dir\0"s + dir.log_dir() + '\0'))
      << absl::CEscape(cmdline);
  EXPECT_NE(cmdline.find("\0--\0"s + KTESIO_PROBE_PATH + '\0'), std::string::npos);
  std::optional<process::Launched> left = backend.UnconfirmedLaunch(dir.run_dir());
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->shim.pid, launched->shim.pid);
  EXPECT_EQ(left->agent.pid, launched->agent.pid);
  // A new session, and the agent runs with the request's environment, not the launcher's.
  EXPECT_EQ(getsid(launched->shim.pid), launched->shim.pid);
  EXPECT_TRUE(WaitUntil([&] {
    return ReadLog(dir.log_dir()).find("KT_LAUNCHER_VAR=from the request") != std::string::npos;
  })) << ReadLog(dir.log_dir());
  // The shim's own stderr is the run dir's shim.log, as for an exec'd shim.
  EXPECT_TRUE(ReadFile(dir.run_dir() + "/shim.log").has_value());
  ASSERT_EQ(kill(-launched->agent.pid, SIGKILL), 0);
  guard.group = 0;
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(dir.run_dir() + "/exit").has_value(); }));
  EXPECT_TRUE(Gone(launched->shim.pid));
  // The next launch is forked by the same launcher.
  absl::StatusOr<process::Launched> again = LaunchProbe(io, backend, dir);
  ASSERT_TRUE(again.ok()) << again.status();
  KillGroupOnExit again_guard{again->agent.pid};
  EXPECT_EQ(ParentOf(again->shim.pid), launcher);
}

TEST(ShimLauncher, ShimsOutliveTheBackendAndItsLauncher) {
  TempDir dir;
  std::optional<process::Launched> launched;
  pid_t launcher = 0;
  {
    boost::asio::io_context io;
    process::ShimBackend backend(io, BuiltShim);
    absl::StatusOr<process::Launched> result = LaunchProbe(io, backend, dir);
    ASSERT_TRUE(result.ok()) << result.status();
    launched = *result;
    launcher = ParentOf(launched->shim.pid);
    ASSERT_NE(launcher, getpid());
  }
  KillGroupOnExit guard{launched->agent.pid};
  // The backend closed the launcher's socket: it ended, and was reaped.
  EXPECT_TRUE(Gone(launcher));
  boost::asio::io_context io;
  process::ShimBackend other(io, BuiltShim);
  EXPECT_TRUE(other.IsAlive(launched->shim));
  EXPECT_TRUE(other.IsAlive(launched->agent));
  EXPECT_TRUE(other.UnconfirmedLaunch(dir.run_dir()).has_value());
}

TEST(ShimLauncher, AKilledLauncherIsReplaced) {
  TempDir first_dir;
  TempDir second_dir;
  TempDir third_dir;
  boost::asio::io_context io;
  process::ShimBackend backend(io, BuiltShim);
  absl::StatusOr<process::Launched> first = LaunchProbe(io, backend, first_dir);
  ASSERT_TRUE(first.ok()) << first.status();
  KillGroupOnExit first_guard{first->agent.pid};
  const pid_t launcher = ParentOf(first->shim.pid);
  ASSERT_NE(launcher, getpid());
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  // The launch that finds it dead cannot have been forked by it: the backend execs that shim.
  absl::StatusOr<process::Launched> second = LaunchProbe(io, backend, second_dir);
  ASSERT_TRUE(second.ok()) << second.status();
  KillGroupOnExit second_guard{second->agent.pid};
  EXPECT_EQ(ParentOf(second->shim.pid), getpid());
  EXPECT_TRUE(Gone(launcher));
  // The one after that has a new launcher.
  absl::StatusOr<process::Launched> third = LaunchProbe(io, backend, third_dir);
  ASSERT_TRUE(third.ok()) << third.status();
  KillGroupOnExit third_guard{third->agent.pid};
  const pid_t replacement = ParentOf(third->shim.pid);
  EXPECT_NE(replacement, getpid());
  EXPECT_NE(replacement, launcher);
  EXPECT_TRUE(CmdlineOf(replacement).starts_with(KTESIO_SHIM_PATH + "\0--launcher\0"s));
  // The first shim, whose launcher was killed, supervises on.
  EXPECT_TRUE(backend.IsAlive(first->shim));
  EXPECT_TRUE(backend.IsAlive(first->agent));
}

TEST(ShimLauncher, ARequestTooLargeForItIsExecd) {
  TempDir dir;
  boost::asio::io_context io;
  process::ShimBackend backend(io, BuiltShim);
  // Two variables (exec takes at most 128 KiB per string) that make the request too large.
  const std::string big(kLauncherMaxRequest / 2 + 1, 'x');
  absl::StatusOr<process::Launched> launched =
      LaunchProbe(io, backend, dir, {"--print-env", "KT_BIG", "--heartbeat-ms", "1000"},
                  {"KT_BIG=" + big, "KT_BIG2=" + big});
  ASSERT_TRUE(launched.ok()) << launched.status();
  KillGroupOnExit guard{launched->agent.pid};
  EXPECT_EQ(ParentOf(launched->shim.pid), getpid());
  EXPECT_TRUE(WaitUntil([&] {
    return ReadLog(dir.log_dir()).find("KT_BIG=" + big.substr(0, 1000)) != std::string::npos;
  }));
}

TEST(ShimLauncher, ExecOnlyBackendsNeverStartOne) {
  TempDir dir;
  boost::asio::io_context io;
  process::ShimBackend backend(io, BuiltShim, process::ShimStart::kExec);
  absl::StatusOr<process::Launched> launched = LaunchProbe(io, backend, dir);
  ASSERT_TRUE(launched.ok()) << launched.status();
  KillGroupOnExit guard{launched->agent.pid};
  EXPECT_EQ(ParentOf(launched->shim.pid), getpid());
  EXPECT_TRUE(CmdlineOf(launched->shim.pid)
                  .starts_with(KTESIO_SHIM_PATH + "\0--run-dir\0"s + dir.run_dir() + '\0'));
}

// A shim binary from before the launcher (here: one that exits at once) does not greet: the
// backend execs it as it always did, at once rather than after the greeting's time-out.
TEST(ShimLauncher, AShimThatDoesNotSpeakTheProtocolIsExecd) {
  TempDir dir;
  boost::asio::io_context io;
  process::ShimBackend backend(io, [] { return process::ShimSearch{"/bin/true", {}}; });
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<process::Launched> launched = LaunchProbe(io, backend, dir);
  ASSERT_FALSE(launched.ok());
  EXPECT_NE(launched.status().message().find("ktesio-shim ended before confirming the launch"),
            std::string_view::npos)
      << launched.status();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(4));
}

}  // namespace
}  // namespace ktesio::daemon::shim::testing
