// The daemon as a service: its API socket adopted from the service manager (socket activation,
// LISTEN_FDS) or reached through a forwarded socket the way `ssh -L` forwards it (socat plays
// sshd's relay here, on one machine), and its config file re-read on SIGHUP.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "daemon_harness.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

// A background child, killed (group) and reaped on destruction.
class Child {
 public:
  explicit Child(std::vector<std::string> args, const std::string& log) {
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      FILE* out = std::fopen(log.c_str(), "w");
      if (out != nullptr) {
        dup2(fileno(out), 1);
        dup2(fileno(out), 2);
      }
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0) {
      kill(-pid_, SIGTERM);
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }

 private:
  pid_t pid_ = -1;
};

std::string Find(const std::string& tool) {
  for (const char* dir : {"/usr/bin", "/bin", "/usr/local/bin"}) {
    const std::string path = std::string(dir) + "/" + tool;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

TEST(Remote, SocketActivationAdoptsTheInheritedSocket) {
  const std::string activate = Find("systemd-socket-activate");
  if (activate.empty()) GTEST_SKIP() << "systemd-socket-activate not installed";
  TempDir dir;
  const std::string socket = dir / "act.sock";
  // The service manager owns the socket; ktesiod is started on the first connection and must
  // serve on the inherited descriptor, not bind its own.
  Child manager(
      {activate, "-l", socket, KtesiodPath(), "--state-dir", dir / "state", "--socket", socket},
      dir / "activate.log");
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(socket); }));
  RunResult status = RunProcess({KtctlPath(), "--socket", socket, "daemon", "status", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err << ReadFileOrEmpty(dir / "activate.log");
  std::optional<Json> doc = ParseJson(status.out);
  ASSERT_TRUE(doc.has_value()) << status.out;
  EXPECT_EQ((*doc)["socket"].string, socket);
  EXPECT_NE(ReadFileOrEmpty(dir / "activate.log").find("passed by the service manager"),
            std::string::npos)
      << ReadFileOrEmpty(dir / "activate.log");
}

TEST(Remote, ForwardedSocketServesTheWholeApi) {
  const std::string socat = Find("socat");
  if (socat.empty()) GTEST_SKIP() << "socat not installed";
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  TempDir here;
  const std::string forwarded = here / "fwd.sock";
  // What `ssh -L LOCAL.sock:REMOTE.sock host` does: a local socket relayed to the daemon's.
  Child relay(
      {socat, "UNIX-LISTEN:" + forwarded + ",fork,mode=600", "UNIX-CONNECT:" + daemon.socket()},
      here / "socat.log");
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(forwarded); }));
  auto ctl = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {KtctlPath(), "--socket", forwarded};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  };
  EXPECT_EQ(ctl({"daemon", "status"}).exit_code, 0);
  ASSERT_EQ(ctl({"agent", "register", "remote", "--kind", "mock"}).exit_code, 0);
  RunResult start = ctl({"agent", "start", "remote"});
  ASSERT_EQ(start.exit_code, 0) << start.err;
  // A server stream (logs follow) works through the relay as well as unary calls.
  RunOptions briefly;
  briefly.timeout = std::chrono::milliseconds(1500);
  std::vector<std::string> follow = {KtctlPath(), "--socket", forwarded, "events", "--since", "0"};
  RunResult events = RunProcess(follow, briefly);
  EXPECT_NE(events.out.find("remote"), std::string::npos) << events.out << events.err;
  EXPECT_EQ(ctl({"agent", "stop", "remote", "--timeout", "0"}).exit_code, 0);
  // The daemon saw the relay's uid (the SSH user, in real life) as the peer.
  EXPECT_NE(daemon.DaemonLog().find("audit uid=" + std::to_string(getuid()) + " rpc=StartAgent"),
            std::string::npos);
}

TEST(Service, SighupReloadsTheLogLevelAndRefusesABrokenFile) {
  TempDir dir;
  const std::string config = dir / "ktesiod.toml";
  const std::string socket = dir / "d.sock";
  const std::string log = dir / "daemon.log";
  WriteFileOrDie(config, "version = 1\nlog_level = \"warn\"\n");
  pid_t pid = fork();
  if (pid == 0) {
    FILE* out = std::fopen(log.c_str(), "w");
    dup2(fileno(out), 2);
    execl(KtesiodPath().c_str(), "ktesiod", "--state-dir", (dir / "state").c_str(), "--socket",
          socket.c_str(), "--config", config.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_TRUE(WaitFor([&] { return SocketAnswers(socket); }));
  auto ctl = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {KtctlPath(), "--socket", socket};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  };
  ASSERT_EQ(ctl({"agent", "register", "quiet", "--kind", "mock"}).exit_code, 0);
  EXPECT_EQ(ReadFileOrEmpty(log).find("rpc=RegisterAgent"), std::string::npos)
      << "audit lines are info: hidden at warn";
  // Raise the level and reload: the next audit line shows.
  WriteFileOrDie(config, "version = 1\nlog_level = \"info\"\nsocket_group = \"other\"\n");
  kill(pid, SIGHUP);
  ASSERT_TRUE(WaitFor([&] {
    return ReadFileOrEmpty(log).find("log_level warn -> info") != std::string::npos;
  })) << ReadFileOrEmpty(log);
  EXPECT_NE(ReadFileOrEmpty(log).find("'socket_group' changed"), std::string::npos);
  ASSERT_EQ(ctl({"agent", "register", "loud", "--kind", "mock"}).exit_code, 0);
  EXPECT_TRUE(WaitFor([&] {
    return ReadFileOrEmpty(log).find("rpc=RegisterAgent instance=loud") != std::string::npos;
  }));
  // A broken file changes nothing and the daemon keeps serving.
  WriteFileOrDie(config, "log_level = [\n");
  kill(pid, SIGHUP);
  ASSERT_TRUE(WaitFor([&] {
    return ReadFileOrEmpty(log).find("reload refused, running settings kept") != std::string::npos;
  })) << ReadFileOrEmpty(log);
  EXPECT_EQ(ctl({"daemon", "status"}).exit_code, 0);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace ktesio::testing
