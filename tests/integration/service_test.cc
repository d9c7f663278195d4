// The daemon as a service: its API socket adopted from the service manager (socket activation,
// LISTEN_FDS) or reached through a forwarded socket the way `ssh -L` forwards it (socat plays
// sshd's relay here, on one machine), its config file re-read on SIGHUP, and system mode: the
// socket group's members allowed, everyone else refused, every mutating call audited.

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

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
  pid_t pid() const { return pid_; }
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

// An adapter whose agent ignores SIGTERM: only the stop window's SIGKILL ends it.
void WriteStubbornManifest(const std::string& path) {
  WriteFileOrDie(path,
                 "contract_version = \"1.0.0\"\n[adapter]\nkind = \"stubborn\"\n"
                 "[lifecycle.start]\nexec = \"" +
                     ProbePath() +
                     "\"\nargs = [\"--ignore-sigterm\", \"--heartbeat-ms\", \"1000\"]\n"
                     "[capabilities.pause]\nlinux = \"guaranteed\"\n"
                     "[metering]\nsource = \"self-reported\"\n");
}

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
  // Reported right after the level line: wait for it too (a sanitized build is slower).
  EXPECT_TRUE(WaitFor([&] {
    return ReadFileOrEmpty(log).find("'socket_group' changed") != std::string::npos;
  })) << ReadFileOrEmpty(log);
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

// Without --config the file is optional: a reload with none says the defaults apply.
TEST(Service, SighupWithoutAConfigFileSaysTheDefaultsApply) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  ASSERT_EQ(kill(daemon.pid(), SIGHUP), 0);
  EXPECT_TRUE(WaitFor([&] {
    return daemon.DaemonLog().find("reload: no " + daemon.state_dir() +
                                   "/ktesiod.toml: the defaults apply") != std::string::npos;
  })) << daemon.DaemonLog();
  EXPECT_EQ(daemon.DaemonLog().find("ktesiod.toml read"), std::string::npos);
  EXPECT_EQ(daemon.Ctl({"daemon", "status"}).exit_code, 0);
}

TEST(Service, LimitsAndTheDefaultStopWindowComeFromTheConfigFileAndReloadLive) {
  TempDir dir;
  const std::string config = dir / "ktesiod.toml";
  const std::string socket = dir / "d.sock";
  WriteFileOrDie(config,
                 "version = 1\nstop_timeout_secs = 1\nmax_instances = 2\nmax_streams = 1\n");
  Child daemon(
      {KtesiodPath(), "--state-dir", dir / "state", "--socket", socket, "--config", config},
      dir / "daemon.log");
  ASSERT_TRUE(WaitFor([&] { return SocketAnswers(socket); }))
      << ReadFileOrEmpty(dir / "daemon.log");
  auto ctl = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {KtctlPath(), "--socket", socket};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  };
  // An agent that ignores SIGTERM: a stop without --timeout waits stop_timeout_secs (1 s, not
  // the built-in 30 s), then kills the group.
  WriteStubbornManifest(dir / "stubborn.toml");
  ASSERT_EQ(ctl({"agent", "register", "a", "--manifest", dir / "stubborn.toml"}).exit_code, 0);
  ASSERT_EQ(ctl({"agent", "start", "a"}).exit_code, 0);
  const auto before = std::chrono::steady_clock::now();
  RunResult stop = ctl({"agent", "stop", "a", "--json"});
  const auto took = std::chrono::steady_clock::now() - before;
  ASSERT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_NE(ReadFileOrEmpty(dir / "daemon.log")
                .find("instance=a from=stopping to=stopped cause=\"stop-forced"),
            std::string::npos)
      << ReadFileOrEmpty(dir / "daemon.log");
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_GE(took, std::chrono::milliseconds(900));

  // max_instances = 2: the third registration is refused and nothing is written.
  ASSERT_EQ(ctl({"agent", "register", "b", "--kind", "mock"}).exit_code, 0);
  RunResult third = ctl({"agent", "register", "c", "--kind", "mock", "--json"});
  EXPECT_EQ(third.exit_code, 1) << third.out << third.err;
  EXPECT_NE(third.out.find("LIMIT_REACHED"), std::string::npos) << third.out;
  EXPECT_NE(third.out.find("max_instances"), std::string::npos) << third.out;
  EXPECT_EQ(ctl({"agent", "show", "c"}).exit_code, 3);

  // max_streams = 1: a second concurrent stream is refused while the first runs. The first
  // replays the log from 0, so its first line shows it is attached.
  Child follower({KtctlPath(), "--socket", socket, "events", "--since", "0"}, dir / "events.log");
  ASSERT_TRUE(WaitFor([&] { return !ReadFileOrEmpty(dir / "events.log").empty(); }));
  RunOptions briefly;
  briefly.timeout = std::chrono::milliseconds(5000);
  RunResult second = RunProcess({KtctlPath(), "--socket", socket, "events"}, briefly);
  EXPECT_EQ(second.exit_code, 1) << second.out << second.err;
  EXPECT_NE(second.err.find("max_streams"), std::string::npos) << second.err;

  // SIGHUP applies new limits at once.
  WriteFileOrDie(config, "version = 1\nmax_instances = 3\n");
  ASSERT_EQ(kill(daemon.pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitFor([&] {
    return ReadFileOrEmpty(dir / "daemon.log").find("reload: max_instances 2 -> 3") !=
           std::string::npos;
  })) << ReadFileOrEmpty(dir / "daemon.log");
  EXPECT_NE(ReadFileOrEmpty(dir / "daemon.log").find("reload: stop_timeout_secs 1 -> 30"),
            std::string::npos);
  RunResult now = ctl({"agent", "register", "c", "--kind", "mock"});
  EXPECT_EQ(now.exit_code, 0) << now.err;
}

// memory_trim_idle_secs: after start-up goes quiet the daemon trims its working set once (and
// logs it), keeps serving from the code it paged out, and trims again only after new API calls
// have gone quiet in turn.
TEST(Service, AnIdleDaemonTrimsItsMemoryAndKeepsServing) {
  TempDir dir;
  const std::string config = dir / "ktesiod.toml";
  const std::string socket = dir / "d.sock";
  WriteFileOrDie(config, "version = 1\nmemory_trim_idle_secs = 1\n");
  Child daemon(
      {KtesiodPath(), "--state-dir", dir / "state", "--socket", socket, "--config", config},
      dir / "daemon.log");
  ASSERT_TRUE(WaitFor([&] { return SocketAnswers(socket); }))
      << ReadFileOrEmpty(dir / "daemon.log");
  auto trims = [&] {
    const std::string log = ReadFileOrEmpty(dir / "daemon.log");
    size_t count = 0;
    for (size_t at = log.find("memory trim: resident "); at != std::string::npos;
         at = log.find("memory trim: resident ", at + 1)) {
      ++count;
    }
    return count;
  };
  ASSERT_TRUE(WaitFor([&] { return trims() >= 1; }, std::chrono::seconds(20)))
      << ReadFileOrEmpty(dir / "daemon.log");
  const size_t after_boot = trims();
  auto ctl = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {KtctlPath(), "--socket", socket};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  };
  // Everything still works from paged-out code: register, start, list, stop.
  WriteFileOrDie(dir / "probe.toml",
                 "contract_version = \"1.0.0\"\n[adapter]\nkind = \"probe\"\n"
                 "[lifecycle.start]\nexec = \"" +
                     ProbePath() +
                     "\"\nargs = [\"--heartbeat-ms\", \"1000\"]\n"
                     "[capabilities.pause]\nlinux = \"guaranteed\"\n"
                     "[metering]\nsource = \"self-reported\"\n");
  ASSERT_EQ(ctl({"agent", "register", "m", "--manifest", dir / "probe.toml"}).exit_code, 0);
  RunResult start = ctl({"agent", "start", "m"});
  ASSERT_EQ(start.exit_code, 0) << start.out << start.err;
  RunResult list = ctl({"agent", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("\"m\""), std::string::npos) << list.out;
  ASSERT_EQ(ctl({"agent", "stop", "m"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return trims() > after_boot; }, std::chrono::seconds(20)))
      << ReadFileOrEmpty(dir / "daemon.log");
  EXPECT_EQ(ctl({"daemon", "status"}).exit_code, 0);
}

TEST(Service, TheSocketPathFromTheConfigFileUnlessAFlagChoosesOne) {
  TempDir dir;
  const std::string config = dir / "ktesiod.toml";
  const std::string socket = dir / "from-config.sock";
  WriteFileOrDie(config, "version = 1\nsocket = \"" + socket + "\"\n");
  Child daemon({"/usr/bin/env", "-u", "KTESIO_SOCKET", KtesiodPath(), "--state-dir", dir / "state",
                "--config", config},
               dir / "daemon.log");
  ASSERT_TRUE(WaitFor([&] { return SocketAnswers(socket); }))
      << ReadFileOrEmpty(dir / "daemon.log");
  RunResult status = RunProcess({KtctlPath(), "--socket", socket, "daemon", "status", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  std::optional<Json> doc = ParseJson(status.out);
  ASSERT_TRUE(doc.has_value()) << status.out;
  EXPECT_EQ((*doc)["socket"].string, socket);
}

// The ordered full stop as systemd runs it at shutdown: ktesio-agents.service's own ExecStop
// line (taken from the unit file) while the daemon serves, then SIGTERM to the daemon.
TEST(Service, FleetStopFromTheAgentsUnitThenTheDaemon) {
  TempDir dir;
  WriteFileOrDie(dir / "ktesiod.toml", "version = 1\nstop_timeout_secs = 1\n");
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start({"--config", dir / "ktesiod.toml"})) << daemon.DaemonLog();
  WriteStubbornManifest(dir / "stubborn.toml");
  ASSERT_EQ(
      daemon.Ctl({"agent", "register", "stubborn", "--manifest", dir / "stubborn.toml"}).exit_code,
      0);
  for (const char* name : {"plain", "frozen", "idle"}) {
    ASSERT_EQ(daemon.Ctl({"agent", "register", name, "--kind", "mock"}).exit_code, 0);
  }
  std::vector<pid_t> pids;
  for (const char* name : {"plain", "frozen", "stubborn"}) {
    ASSERT_EQ(daemon.Ctl({"agent", "start", name}).exit_code, 0);
    std::optional<Json> shown = ParseJson(daemon.Ctl({"agent", "show", name, "--json"}).out);
    ASSERT_TRUE(shown.has_value());
    pids.push_back(static_cast<pid_t>((*shown)["instance"]["pid"].Int()));
  }
  ASSERT_EQ(daemon.Ctl({"agent", "pause", "frozen"}).exit_code, 0);

  // The unit's ExecStop, pointed at this build and this daemon's socket.
  std::string exec_stop;
  std::istringstream unit(
      ReadFileOrEmpty(std::string(KTESIO_SOURCE_DIR) + "/packaging/systemd/ktesio-agents.service"));
  for (std::string line; std::getline(unit, line);) {
    if (line.rfind("ExecStop=", 0) == 0) exec_stop = line.substr(9);
  }
  ASSERT_FALSE(exec_stop.empty());
  std::vector<std::string> argv;
  std::istringstream words(exec_stop);
  for (std::string word; words >> word;) {
    argv.push_back(word == "/usr/bin/ktctl"             ? KtctlPath()
                   : word == "/run/ktesio/ktesiod.sock" ? daemon.socket()
                                                        : word);
  }
  RunResult stop = RunProcess(argv);
  ASSERT_EQ(stop.exit_code, 0) << stop.out << stop.err << daemon.DaemonLog();
  EXPECT_NE(stop.out.find("frozen: stopped"), std::string::npos) << stop.out;
  EXPECT_NE(stop.out.find("plain: stopped"), std::string::npos) << stop.out;
  EXPECT_NE(stop.out.find("stubborn: stopped (stop-forced"), std::string::npos) << stop.out;
  EXPECT_EQ(stop.out.find("idle"), std::string::npos) << stop.out;
  for (pid_t pid : pids) {
    EXPECT_TRUE(WaitFor([&] { return kill(pid, 0) != 0; })) << "agent pid " << pid << " survived";
  }
  RunResult idle = daemon.Ctl({"agent", "show", "idle", "--json"});
  EXPECT_NE(idle.out.find("\"state\":\"registered\""), std::string::npos) << idle.out;
  // Nothing left to stop: an empty, well-formed answer.
  RunResult again = daemon.Ctl({"agent", "stop", "--all", "--json"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "{\"schema_version\":2,\"instances\":[],\"notices\":[]}\n");
  EXPECT_EQ(daemon.Ctl({"agent", "stop", "--all", "plain"}).exit_code, 2);
  EXPECT_EQ(daemon.Ctl({"agent", "stop"}).exit_code, 2);
  EXPECT_NE(daemon.DaemonLog().find("rpc=StopAllAgents instance= result=ok"), std::string::npos);
  // Then systemd stops the daemon itself.
  EXPECT_EQ(daemon.Stop(), 0);
}

// `ktctl` run as another user: setpriv switches uid, gid and supplementary groups (numeric ids
// need no passwd or group entries, so the test adds no users to the machine).
RunResult CtlAs(uid_t uid, gid_t gid, const std::string& groups, const std::string& socket,
                const std::vector<std::string>& args, const RunOptions& options = {}) {
  std::vector<std::string> argv = {Find("setpriv"),
                                   "--reuid=" + std::to_string(uid),
                                   "--regid=" + std::to_string(gid),
                                   groups.empty() ? "--clear-groups" : "--groups=" + groups,
                                   KtctlPath(),
                                   "--socket",
                                   socket};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, options);
}

TEST(SystemMode, GroupMembersAllowedOthersRefusedEveryMutationAudited) {
  if (geteuid() != 0) GTEST_SKIP() << "system mode needs root to set the socket's group";
  if (Find("setpriv").empty()) GTEST_SKIP() << "setpriv (util-linux) not installed";
  constexpr gid_t kGroup = 61000;          // the socket group (--socket-group takes a numeric GID)
  constexpr uid_t kMember = 61001;         // primary group = kGroup
  constexpr uid_t kSupplementary = 61002;  // kGroup only as a supplementary group
  constexpr uid_t kStranger = 61003;
  TempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0711), 0);
  const std::string socket = dir / "run/ktesiod.sock";
  WriteFileOrDie(dir / "ktesiod.toml", "version = 1\n");
  // The mock builtin runs `ktesio-probe` by name: put the fixture on the daemon's PATH.
  const std::string probe_dir = ProbePath().substr(0, ProbePath().rfind('/'));
  Child daemon({"/usr/bin/env", "PATH=" + probe_dir + ":/usr/bin:/bin", KtesiodPath(), "--system",
                "--state-dir", dir / "state", "--socket", socket, "--config", dir / "ktesiod.toml",
                "--socket-group", std::to_string(kGroup)},
               dir / "daemon.log");
  ASSERT_TRUE(WaitFor([&] { return SocketAnswers(socket); }))
      << ReadFileOrEmpty(dir / "daemon.log");

  // The socket and its directory: 0660 / 0750, group kGroup.
  struct stat st {};
  ASSERT_EQ(stat(socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, kGroup);
  ASSERT_EQ(stat((dir / "run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  EXPECT_EQ(st.st_gid, kGroup);

  // A member by primary group drives the whole lifecycle.
  RunResult reg =
      CtlAs(kMember, kGroup, "", socket, {"agent", "register", "sys", "--kind", "mock"});
  ASSERT_EQ(reg.exit_code, 0) << reg.out << reg.err << ReadFileOrEmpty(dir / "daemon.log");
  RunResult start = CtlAs(kMember, kGroup, "", socket, {"agent", "start", "sys"});
  ASSERT_EQ(start.exit_code, 0) << start.out << start.err << ReadFileOrEmpty(dir / "daemon.log");
  // A member by supplementary group only.
  RunResult stop = CtlAs(kSupplementary, kSupplementary, std::to_string(kGroup), socket,
                         {"agent", "stop", "sys", "--timeout", "2"});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  // A failed mutating call is audited too, with its reason.
  EXPECT_EQ(CtlAs(kMember, kGroup, "", socket, {"agent", "start", "missing"}).exit_code, 3);

  // A stranger cannot even reach the socket (file modes) ...
  RunResult refused = CtlAs(kStranger, kStranger, "", socket, {"daemon", "status"});
  EXPECT_EQ(refused.exit_code, 7) << refused.out << refused.err;
  // ... and when an operator loosens the modes by mistake, the peer-credential check still
  // refuses it, and nothing changes.
  ASSERT_EQ(chmod((dir / "run").c_str(), 0755), 0);
  ASSERT_EQ(chmod(socket.c_str(), 0666), 0);
  RunResult denied =
      CtlAs(kStranger, kStranger, "", socket, {"agent", "register", "intruder", "--kind", "mock"});
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_NE(denied.err.find("uid 61003 may not use this daemon"), std::string::npos) << denied.err;
  RunResult list = RunProcess({KtctlPath(), "--socket", socket, "agent", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out.find("intruder"), std::string::npos) << list.out;

  // The audit trail: the daemon log and `audit` events name the caller's uid, RPC and instance.
  const std::string log = ReadFileOrEmpty(dir / "daemon.log");
  EXPECT_NE(log.find("audit uid=61001 rpc=RegisterAgent instance=sys result=ok"), std::string::npos)
      << log;
  EXPECT_NE(log.find("audit uid=61002 rpc=StopAgent instance=sys result=ok"), std::string::npos);
  EXPECT_NE(log.find("denied uid=61003"), std::string::npos);
  RunOptions briefly;
  briefly.timeout = std::chrono::milliseconds(1500);
  RunResult events = RunProcess(
      {KtctlPath(), "--socket", socket, "events", "--since", "0", "--json", "--audit"}, briefly);
  std::vector<std::string> audits;
  std::istringstream lines(events.out);
  for (std::string line; std::getline(lines, line);) {
    std::optional<Json> event = ParseJson(line);
    ASSERT_TRUE(event.has_value()) << line;
    const Json& payload = *event;
    if (payload["type"].string != "audit") continue;
    EXPECT_EQ(payload.Keys(), (std::vector<std::string>{"type", "cursor", "schema_version", "uid",
                                                        "rpc", "instance", "result", "at"}))
        << line;
    audits.push_back(std::to_string(payload["uid"].Int()) + " " + payload["rpc"].string + " " +
                     payload["instance"].string + " " + payload["result"].string);
  }
  // The stranger's refused call is in the trail too, with its uid.
  EXPECT_EQ(audits, (std::vector<std::string>{"61001 RegisterAgent sys ok",
                                              "61001 StartAgent sys ok", "61002 StopAgent sys ok",
                                              "61001 StartAgent missing NOT_FOUND",
                                              "61003 RegisterAgent intruder PERMISSION_DENIED"}))
      << events.out;
}

}  // namespace
}  // namespace ktesio::testing
