// The shim launcher: its wire format, and real shims forked by a real `ktesio-shim --launcher`
// through the daemon's ShimBackend (docs/shim.md "The launcher").

#include <gtest/gtest.h>

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
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

TEST(LauncherProtocol, TheTitleAreaFillsTheStacksTopPage) {
  // 8 bytes of end marker, the exec'd path, then the arguments: path, flag and the filler.
  EXPECT_EQ(LauncherFillerBytes("/s"), 4096U - 8 - 3 - 3 - 11 - 1);
  EXPECT_EQ(LauncherFillerBytes(std::string(100, 'p'), 8192), 8192U - 8 - 101 - 101 - 11 - 1);
  // A path so long that less would be left: 511 bytes of filler regardless.
  EXPECT_EQ(LauncherFillerBytes(std::string(1900, 'p')), 511U);
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

// Where the symlink `path` points, or "".
std::string LinkOf(const std::string& path) {
  char target[4096];
  const ssize_t n = readlink(path.c_str(), target, sizeof(target));
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
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
  const std::string launcher_title = KTESIO_SHIM_PATH + "\0--launcher\0"s;
  const std::string launcher_cmdline = CmdlineOf(launcher);
  EXPECT_TRUE(launcher_cmdline.starts_with(launcher_title));
  // The filler after the flag is blanked: the rest of the area is NULs.
  EXPECT_EQ(launcher_cmdline.find_first_not_of('\0', launcher_title.size()), std::string::npos);
  // Its argument area starts on a page (fields 48 and 49 of /proc/PID/stat): a shim's title
  // written there dirties one page of its stack, not two.
  const std::string stat = ReadFile(absl::StrCat("/proc/", launcher, "/stat")).value_or("");
  ASSERT_NE(stat.rfind(')'), std::string::npos) << stat;
  const std::vector<std::string> fields = absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ');
  ASSERT_GT(fields.size(), 47U);
  uint64_t arg_start = 0;
  uint64_t arg_end = 0;
  ASSERT_TRUE(absl::SimpleAtoi(fields[45], &arg_start) && absl::SimpleAtoi(fields[46], &arg_end));
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(arg_start % page, 0U) << arg_start;
  EXPECT_EQ(arg_end - arg_start, page - 8 - (std::strlen(KTESIO_SHIM_PATH) + 1));
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
  EXPECT_EQ(LinkOf(absl::StrCat("/proc/", launched->shim.pid, "/fd/2")),
            dir.run_dir() + "/shim.log");
  const int64_t killed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  ASSERT_EQ(kill(-launched->agent.pid, SIGKILL), 0);
  guard.group = 0;
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(dir.run_dir() + "/exit").has_value(); }));
  EXPECT_TRUE(Gone(launched->shim.pid));
  // The record says when the shim wrote it (a later daemon times the run's end by it).
  std::optional<process::ExitRecord> record = backend.ReadExit(dir.run_dir());
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->kind, process::ExitRecord::Kind::kSignaled);
  EXPECT_GE(record->at_ms, killed_ms - 20);  // file times lag by up to a tick
  EXPECT_LE(record->at_ms, killed_ms + 10000);
  // The next launch is forked by the same launcher.
  absl::StatusOr<process::Launched> again = LaunchProbe(io, backend, dir);
  ASSERT_TRUE(again.ok()) << again.status();
  KillGroupOnExit again_guard{again->agent.pid};
  EXPECT_EQ(ParentOf(again->shim.pid), launcher);
}

TEST(ShimLauncher, ShimsOutliveTheBackendAndItsLauncher) {
  TempDir dir;
  std::optional<process::Launched> launched;
  KillGroupOnExit guard;
  pid_t launcher = 0;
  {
    boost::asio::io_context io;
    process::ShimBackend backend(io, BuiltShim);
    absl::StatusOr<process::Launched> result = LaunchProbe(io, backend, dir);
    ASSERT_TRUE(result.ok()) << result.status();
    launched = *result;
    guard.group = launched->agent.pid;
    launcher = ParentOf(launched->shim.pid);
    ASSERT_NE(launcher, getpid());
  }
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

// A sanitizer's runtime installs its own handlers (SIGSEGV, SIGBUS, SIGFPE) when a process
// starts: an exec'd shim of a sanitizer build has them, a forked one had them reset with every
// other disposition, as an exec would, and never starts the runtime again.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// What a shim's process looks like from /proc, for comparing one with another: its signal state
// (without the caught signals in a sanitizer build), umask, and its open descriptors by number
// and target (`dir` written as DIR, pipe and other inode numbers left out).
std::string DescribeProcess(pid_t pid, const TempDir& dir) {
  std::string text;
  const std::string status = ReadFile(absl::StrCat("/proc/", pid, "/status")).value_or("");
  for (const std::string& line : std::vector<std::string>(absl::StrSplit(status, '\n'))) {
    // (not SigQ: the signals queued for the whole user)
    if (line.starts_with("SigQ:") || (kSanitized && line.starts_with("SigCgt:"))) {
      continue;
    }
    if (line.starts_with("Sig") || line.starts_with("Umask:")) {
      absl::StrAppend(&text, line, "\n");
    }
  }
  const std::string fd_dir = absl::StrCat("/proc/", pid, "/fd");
  std::vector<int> fds;
  if (DIR* listing = opendir(fd_dir.c_str())) {
    while (dirent* entry = readdir(listing)) {
      int fd = 0;
      if (absl::SimpleAtoi(entry->d_name, &fd)) {
        fds.push_back(fd);
      }
    }
    closedir(listing);
  }
  std::sort(fds.begin(), fds.end());
  for (int fd : fds) {
    std::string target = LinkOf(absl::StrCat(fd_dir, "/", fd));
    target = absl::StrReplaceAll(target, {{dir.path(), "DIR"}});
    if (const size_t bracket = target.find(":["); bracket != std::string::npos) {
      target.resize(bracket);
    }
    absl::StrAppend(&text, fd, " ", target, "\n");
  }
  return text;
}

TEST(ShimLauncher, AForkedShimHasTheSignalsAndDescriptorsOfAnExecdOne) {
  TempDir forked_dir;
  TempDir execd_dir;
  boost::asio::io_context io;
  process::ShimBackend forking(io, BuiltShim);
  process::ShimBackend execing(io, BuiltShim, process::ShimStart::kExec);
  absl::StatusOr<process::Launched> forked = LaunchProbe(io, forking, forked_dir);
  ASSERT_TRUE(forked.ok()) << forked.status();
  KillGroupOnExit forked_guard{forked->agent.pid};
  absl::StatusOr<process::Launched> execd = LaunchProbe(io, execing, execd_dir);
  ASSERT_TRUE(execd.ok()) << execd.status();
  KillGroupOnExit execd_guard{execd->agent.pid};
  ASSERT_NE(ParentOf(forked->shim.pid), getpid());
  ASSERT_EQ(ParentOf(execd->shim.pid), getpid());
  for (const TempDir* dir : {&forked_dir, &execd_dir}) {
    ASSERT_TRUE(WaitUntil(
        [&] { return ReadLog(dir->log_dir()).find("probe started") != std::string::npos; }));
  }
  const std::string forked_view = DescribeProcess(forked->shim.pid, forked_dir);
  EXPECT_NE(forked_view.find("SigBlk:"), std::string::npos);
  EXPECT_NE(forked_view.find("2 DIR/run/shim.log"), std::string::npos) << forked_view;
  EXPECT_EQ(forked_view, DescribeProcess(execd->shim.pid, execd_dir));
}

// `ktesio-shim --launcher` run directly, with a filler of `filler_bytes` after the flag, the test
// holding the daemon's end of its socket.
class DirectLauncher {
 public:
  explicit DirectLauncher(size_t filler_bytes) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      ADD_FAILURE() << "socketpair: " << std::strerror(errno);
      return;
    }
    std::vector<std::string> storage = {KTESIO_SHIM_PATH, std::string(kLauncherFlag),
                                        std::string(filler_bytes, 'x')};
    std::vector<char*> argv;
    for (std::string& arg : storage) {
      argv.push_back(arg.data());
    }
    argv.push_back(nullptr);
    char* env[] = {nullptr};
    // (fork and exec rather than posix_spawn: the shim's own spawn.h shadows <spawn.h> here)
    pid_ = fork();
    if (pid_ == 0) {
      if (dup2(pair[1], 3) == 3) {
        execve(KTESIO_SHIM_PATH, argv.data(), env);
      }
      _exit(127);
    }
    close(pair[1]);
    socket_ = pair[0];
    if (pid_ < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      pid_ = 0;
    }
  }
  DirectLauncher(const DirectLauncher&) = delete;
  DirectLauncher& operator=(const DirectLauncher&) = delete;
  ~DirectLauncher() {
    if (socket_ >= 0) {
      close(socket_);
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  std::optional<int32_t> Answer() {
    pollfd pfd{socket_, POLLIN, 0};
    int32_t answer = 0;
    if (poll(&pfd, 1, static_cast<int>(kDeadline.count())) != 1 ||
        recv(socket_, &answer, sizeof(answer), 0) != sizeof(answer)) {
      return std::nullopt;
    }
    return answer;
  }

  // Whether an answer waits to be read (without reading it).
  bool AnswerWaiting() {
    int32_t answer = 0;
    return recv(socket_, &answer, sizeof(answer), MSG_PEEK | MSG_DONTWAIT) == sizeof(answer);
  }

  bool Send(const std::string& request, const std::vector<int>& fds) {
    iovec iov{const_cast<char*>(request.data()), request.size()};
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)] = {};
    if (!fds.empty()) {
      message.msg_control = control;
      message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* header = CMSG_FIRSTHDR(&message);
      header->cmsg_level = SOL_SOCKET;
      header->cmsg_type = SCM_RIGHTS;
      header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
    }
    return sendmsg(socket_, &message, MSG_NOSIGNAL) == static_cast<ssize_t>(request.size());
  }

  // Closes the daemon's end; the launcher's wait status once it has ended by itself.
  std::optional<int> CloseAndWait() {
    close(socket_);
    socket_ = -1;
    int status = 0;
    if (!WaitUntil([&] { return waitpid(pid_, &status, WNOHANG) == pid_; })) {
      return std::nullopt;
    }
    pid_ = 0;
    return status;
  }

 private:
  pid_t pid_ = 0;
  int socket_ = -1;
};

TEST(LauncherBinary, AnswersWhatItCannotTakeWithoutForkingAndEndsWithTheDaemon) {
  DirectLauncher launcher(LauncherFillerBytes(KTESIO_SHIM_PATH));
  ASSERT_EQ(launcher.Answer(), kLauncherHello);
  TempDir dir;
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const std::vector<std::string> argv = {KTESIO_SHIM_PATH, "--run-dir",   dir.run_dir(),
                                         "--log-dir",      dir.log_dir(), "--cwd",
                                         dir.path(),       "--",          KTESIO_PROBE_PATH};
  std::string bad_magic = EncodeLaunchRequest(argv, {});
  bad_magic[0] ^= 1;
  ASSERT_TRUE(launcher.Send(bad_magic, {pipe_fds[0], pipe_fds[1]}));
  EXPECT_EQ(launcher.Answer(), -EPROTO);
  ASSERT_TRUE(launcher.Send(EncodeLaunchRequest(argv, {}), {}));  // without its descriptors
  EXPECT_EQ(launcher.Answer(), -EPROTO);
  ASSERT_TRUE(launcher.Send(EncodeLaunchRequest(argv, {}), {pipe_fds[0]}));
  EXPECT_EQ(launcher.Answer(), -EPROTO);
  // Nothing ran: no shim wrote its records.
  EXPECT_FALSE(ReadFile(dir.run_dir() + "/shim.pid").has_value());
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  // It ends by itself, cleanly, at the end of its socket.
  std::optional<int> status = launcher.CloseAndWait();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
}

// A daemon that dies with an answer (here: the greeting) unread resets the launcher's socket
// rather than ending it: the launcher ends as cleanly.
TEST(LauncherBinary, EndsCleanlyWhenTheDaemonDiesWithAnAnswerUnread) {
  DirectLauncher launcher(LauncherFillerBytes(KTESIO_SHIM_PATH));
  ASSERT_TRUE(WaitUntil([&] { return launcher.AnswerWaiting(); }));
  std::optional<int> status = launcher.CloseAndWait();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
}

TEST(LauncherBinary, DeclinesARunDirItsTitleAreaCannotShow) {
  DirectLauncher launcher(8);  // an area of the path, the flag and 9 bytes
  ASSERT_EQ(launcher.Answer(), kLauncherHello);
  TempDir dir;
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const std::vector<std::string> argv = {KTESIO_SHIM_PATH, "--run-dir", dir.run_dir(), "--",
                                         KTESIO_PROBE_PATH};
  ASSERT_TRUE(launcher.Send(EncodeLaunchRequest(argv, {}), {pipe_fds[0], pipe_fds[1]}));
  EXPECT_EQ(launcher.Answer(), -E2BIG);
  EXPECT_FALSE(ReadFile(dir.run_dir() + "/shim.pid").has_value());
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

}  // namespace
}  // namespace ktesio::daemon::shim::testing
