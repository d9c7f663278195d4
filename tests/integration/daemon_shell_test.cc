// The daemon shell end to end: socket and state-dir permissions, the single-instance lock, stale
// sockets, the unreachable-daemon exit code, peer-credential checks and `daemon status`.

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "daemon_harness.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(DaemonShell, CreatesOwnerOnlyStateDirAndSocket) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  EXPECT_EQ(ModeOf(daemon.state_dir()), 0700u);
  EXPECT_EQ(ModeOf(daemon.socket()), 0600u);
  struct stat st {};
  ASSERT_EQ(stat((daemon.state_dir() + "/state.db").c_str(), &st), 0);
}

TEST(DaemonShell, StatusJsonAnswers) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  RunResult r = daemon.Ctl({"daemon", "status", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::optional<Json> doc = ParseJson(r.out);
  ASSERT_TRUE(doc.has_value()) << r.out;
  EXPECT_EQ(doc->Keys(), (std::vector<std::string>{
                             "schema_version", "daemon_version", "api_version", "contract_version",
                             "pid", "started_at", "uptime_ms", "state_dir", "socket", "mode", "os",
                             "instances", "degraded", "problems"}));
  EXPECT_EQ((*doc)["schema_version"].Int(), 1);
  EXPECT_EQ((*doc)["api_version"].string, "1.0.0");
  EXPECT_EQ((*doc)["contract_version"].string, "1.0.0");
  EXPECT_EQ((*doc)["pid"].Int(), daemon.pid());
  EXPECT_TRUE((*doc)["uptime_ms"].IsInteger());
  EXPECT_EQ((*doc)["state_dir"].string, daemon.state_dir());
  EXPECT_EQ((*doc)["socket"].string, daemon.socket());
  EXPECT_EQ((*doc)["mode"].string, "user");
  EXPECT_EQ((*doc)["instances"]["total"].Int(), 0);
  EXPECT_EQ((*doc)["degraded"].type, Json::Type::kBool);
  EXPECT_FALSE((*doc)["degraded"].boolean);
  EXPECT_EQ((*doc)["problems"].type, Json::Type::kArray);
  EXPECT_TRUE((*doc)["problems"].array.empty());
  // Global flags are accepted before the subcommand too.
  RunResult before = daemon.Ctl({"--json", "daemon", "status"});
  ASSERT_EQ(before.exit_code, 0);
  EXPECT_TRUE(ParseJson(before.out).has_value());
}

// The standard gRPC health service's answer for `service` (grpc.health.v1.Health/Check, encoded
// by hand: the test has no generated health stubs): 1 SERVING, 2 NOT_SERVING, 3 SERVICE_UNKNOWN,
// -1 when the call failed.
int HealthStatus(const std::string& socket, const std::string& service) {
  grpc::GenericStub stub(grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  const std::string request =
      service.empty() ? std::string()
                      : std::string("\x0a") + static_cast<char>(service.size()) + service;
  grpc::Slice slice(request);
  grpc::ByteBuffer buffer(&slice, 1);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::CompletionQueue queue;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", buffer, &queue);
  call->StartCall();
  grpc::ByteBuffer reply;
  grpc::Status status;
  call->Finish(&reply, &status, nullptr);
  void* tag = nullptr;
  bool ok = false;
  queue.Next(&tag, &ok);
  if (!status.ok()) {
    return status.error_code() == grpc::StatusCode::NOT_FOUND ? 3 : -1;
  }
  std::vector<grpc::Slice> slices;
  if (!reply.Dump(&slices).ok()) {
    return -1;
  }
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : -1;
}

// A daemon that cannot start agents says so, and a start names what is missing and where it
// looked; installing the shim resolves it without a daemon restart.
TEST(DaemonShell, MissingShimIsReportedUntilResolved) {
  DaemonHarness daemon;
  namespace fs = std::filesystem;
  const std::string bin = daemon.dir() + "/bin";
  fs::create_directories(bin);
  fs::copy_file(KtesiodPath(), bin + "/ktesiod");
  daemon.set_binary(bin + "/ktesiod");
  daemon.set_env({"KTESIO_SHIM=" + daemon.dir() + "/no-such-shim"});
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();

  RunResult r = daemon.Ctl({"daemon", "status", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::optional<Json> doc = ParseJson(r.out);
  ASSERT_TRUE(doc.has_value()) << r.out;
  EXPECT_TRUE((*doc)["degraded"].boolean);
  ASSERT_EQ((*doc)["problems"].array.size(), 1u) << r.out;
  const std::string problem = (*doc)["problems"].array[0].string;
  EXPECT_NE(problem.find("ktesio-shim not found"), std::string::npos) << problem;
  EXPECT_NE(problem.find(daemon.dir() + "/no-such-shim"), std::string::npos) << problem;
  EXPECT_NE(problem.find(bin + "/ktesio-shim"), std::string::npos) << problem;
  RunResult text = daemon.Ctl({"daemon", "status"});
  EXPECT_NE(text.out.find("health:     degraded: ktesio-shim not found"), std::string::npos)
      << text.out;
  EXPECT_NE(daemon.DaemonLog().find("degraded: ktesio-shim not found"), std::string::npos);
  EXPECT_EQ(HealthStatus(daemon.socket(), ""), 1);  // the daemon answers
  EXPECT_EQ(HealthStatus(daemon.socket(), "ktesio.v1.AgentService"), 2);

  ASSERT_EQ(daemon.Ctl({"agent", "register", "p", "--kind", "mock"}).exit_code, 0);
  RunResult start = daemon.Ctl({"agent", "start", "p"});
  EXPECT_EQ(start.exit_code, 1);
  EXPECT_NE((start.out + start.err).find("ktesio-shim not found"), std::string::npos)
      << start.out << start.err;
  EXPECT_NE((start.out + start.err).find(bin + "/ktesio-shim"), std::string::npos);

  fs::copy_file(KTESIO_SHIM_PATH, bin + "/ktesio-shim");
  RunResult again = daemon.Ctl({"agent", "start", "p"});
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  std::optional<Json> healed = ParseJson(daemon.Ctl({"daemon", "status", "--json"}).out);
  ASSERT_TRUE(healed.has_value());
  EXPECT_FALSE((*healed)["degraded"].boolean);
  EXPECT_TRUE((*healed)["problems"].array.empty());
  EXPECT_EQ(HealthStatus(daemon.socket(), "ktesio.v1.AgentService"), 1);
  EXPECT_EQ(daemon.Ctl({"agent", "stop", "p"}).exit_code, 0);
}

TEST(DaemonShell, SecondDaemonOnSameStateDirRefuses) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  RunResult second = RunProcess(
      {KtesiodPath(), "--state-dir", daemon.state_dir(), "--socket", daemon.dir() + "/other.sock"});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("already owns the state dir"), std::string::npos) << second.err;
  // The first daemon is untouched.
  EXPECT_EQ(daemon.Ctl({"daemon", "status"}).exit_code, 0);
}

TEST(DaemonShell, SecondDaemonOnLiveSocketRefuses) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  TempDir other;
  RunResult second =
      RunProcess({KtesiodPath(), "--state-dir", other / "state", "--socket", daemon.socket()});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("another daemon is answering"), std::string::npos) << second.err;
  EXPECT_EQ(daemon.Ctl({"daemon", "status"}).exit_code, 0);
}

TEST(DaemonShell, StaleSocketIsReplaced) {
  DaemonHarness daemon;
  // Leave a bound-but-dead socket file where the daemon wants to listen.
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, daemon.socket().c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  ASSERT_FALSE(SocketAnswers(daemon.socket()));
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  EXPECT_EQ(daemon.Ctl({"daemon", "status"}).exit_code, 0);
}

TEST(DaemonShell, NonSocketAtSocketPathIsNotReplaced) {
  DaemonHarness daemon;
  WriteFileOrDie(daemon.socket(), "precious");
  EXPECT_FALSE(daemon.Start());
  EXPECT_NE(daemon.DaemonLog().find("is not a socket"), std::string::npos);
  EXPECT_EQ(ReadFileOrEmpty(daemon.socket()), "precious");
}

TEST(DaemonShell, OverlongSocketPathRefused) {
  TempDir dir;
  std::string socket = dir.path() + "/" + std::string(120, 's') + ".sock";
  RunResult r = RunProcess({KtesiodPath(), "--state-dir", dir / "state", "--socket", socket});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("over the OS limit"), std::string::npos) << r.err;
}

TEST(DaemonShell, RelativeStateDirRefused) {
  RunResult r = RunProcess({KtesiodPath(), "--state-dir", "relative/dir"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("absolute"), std::string::npos) << r.err;
}

TEST(Ktctl, UnknownCommandSuggestsTheNearestOne) {
  RunResult r = RunProcess({KtctlPath(), "agent", "strat", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "ktctl: unknown command 'agent strat x'; did you mean 'ktctl agent start x'? (see "
            "ktctl --help)\n");
  RunResult far = RunProcess({KtctlPath(), "frobnicate"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_EQ(far.err, "ktctl: unknown command 'frobnicate' (see ktctl --help)\n");
}

// A flag before the command words is named as the problem, wherever it stands: an unknown one as
// unknown, a command's own one as belonging after the command.
TEST(Ktctl, AFlagBeforeTheCommandIsNamed) {
  RunResult unknown = RunProcess({KtctlPath(), "--nope", "agent", "list"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(unknown.err, "ktctl: unknown flag '--nope' (see ktctl --help)\n");
  RunResult between = RunProcess({KtctlPath(), "agent", "--nope", "list"});
  EXPECT_EQ(between.err, "ktctl: unknown flag '--nope' (see ktctl --help)\n");
  RunResult misplaced = RunProcess({KtctlPath(), "agent", "--tail", "5", "logs", "x"});
  EXPECT_EQ(misplaced.exit_code, 2);
  EXPECT_EQ(misplaced.err,
            "ktctl: flag '--tail' belongs after the command: ktctl agent logs ... --tail\n");
  RunResult valued = RunProcess({KtctlPath(), "--json=1", "agent", "list"});
  EXPECT_EQ(valued.exit_code, 2);
  EXPECT_EQ(valued.err, "ktctl: --json takes no value\n");
}

// No command is a usage error (exit 2): the help goes to stderr, and under --json stdout holds
// only the error document.
TEST(Ktctl, NoCommandIsAUsageError) {
  RunResult bare = RunProcess({KtctlPath()});
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_EQ(bare.out, "");
  EXPECT_NE(bare.err.find("usage: ktctl"), std::string::npos) << bare.err;
  EXPECT_NE(bare.err.find("ktctl: no command given"), std::string::npos) << bare.err;
  RunResult json = RunProcess({KtctlPath(), "--json"});
  EXPECT_EQ(json.exit_code, 2);
  EXPECT_EQ(json.out,
            "{\"schema_version\":1,\"error\":{\"reason\":\"USAGE\",\"message\":\"no command "
            "given (see ktctl --help)\"}}\n");
  RunResult help = RunProcess({KtctlPath(), "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage: ktctl"), std::string::npos) << help.out;
}

TEST(DaemonShell, UnknownFlagIsUsageError) {
  RunResult r = RunProcess({KtesiodPath(), "--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown argument '--bogus'"), std::string::npos) << r.err;
}

TEST(DaemonShell, InvalidConfigFileRefusedWithPosition) {
  TempDir dir;
  WriteFileOrDie(dir / "bad.toml", "version = 1\nlog_levle = \"debug\"\n");
  RunResult r = RunProcess({KtesiodPath(), "--state-dir", dir / "state", "--socket", dir / "d.sock",
                            "--config", dir / "bad.toml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.toml:2:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown key 'log_levle'"), std::string::npos) << r.err;
}

TEST(DaemonShell, UnreachableDaemonExits7NamingTheSocket) {
  TempDir dir;
  RunResult r = RunProcess({KtctlPath(), "--socket", dir / "nothing.sock", "daemon", "status"});
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_NE(r.err.find(dir / "nothing.sock"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ktesiod"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  // One line only.
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  RunResult json =
      RunProcess({KtctlPath(), "--socket", dir / "nothing.sock", "daemon", "status", "--json"});
  EXPECT_EQ(json.exit_code, 7);
  std::optional<Json> doc = ParseJson(json.out);
  ASSERT_TRUE(doc.has_value()) << json.out;
  EXPECT_EQ((*doc)["error"]["reason"].string, "DAEMON_UNREACHABLE");
}

TEST(DaemonShell, ASocketPathOverTheUnixLimitIsAUsageErrorNamingIt) {
  // sockaddr_un holds 107 bytes of path: a longer one can name no daemon (gRPC's own error for
  // it, "Failed to create secure client channel", named neither the path nor the limit).
  const std::string path = "/tmp/" + std::string(120, 'a') + ".sock";
  RunResult r = RunProcess({KtctlPath(), "--socket", path, "agent", "list"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("over the limit of 107"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  RunResult json = RunProcess({KtctlPath(), "--socket", path, "agent", "list", "--json"});
  EXPECT_EQ(json.exit_code, 2);
  std::optional<Json> doc = ParseJson(json.out);
  ASSERT_TRUE(doc.has_value()) << json.out;
  EXPECT_EQ((*doc)["error"]["reason"].string, "USAGE");
}

TEST(DaemonShell, SocketFromEnvironment) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  RunOptions options;
  options.extra_env = {"KTESIO_SOCKET=" + daemon.socket()};
  RunResult r = RunProcess({KtctlPath(), "daemon", "status"}, options);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(DaemonShell, OtherUidIsRefusedWithPermissionDenied) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root to run a client as another uid";
  }
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  // Open the file-system gate on purpose so the only remaining check is SO_PEERCRED.
  ASSERT_EQ(chmod(daemon.dir().c_str(), 0755), 0);
  ASSERT_EQ(chmod(daemon.socket().c_str(), 0666), 0);
  RunOptions as_nobody;
  as_nobody.uid = 65534;
  as_nobody.gid = 65534;
  RunResult r = daemon.Ctl({"daemon", "status", "--json"}, as_nobody);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  std::optional<Json> doc = ParseJson(r.out);
  ASSERT_TRUE(doc.has_value()) << r.out << r.err;
  EXPECT_EQ((*doc)["error"]["reason"].string, "PERMISSION_DENIED");
  EXPECT_NE(daemon.DaemonLog().find("denied uid=65534"), std::string::npos);
  // Root (our own uid) is still served.
  EXPECT_EQ(daemon.Ctl({"daemon", "status"}).exit_code, 0);
}

// A connection that makes no call (silent, half a preface, or a whole one) does not hold one of
// the daemon's descriptors for good: it is sent away after api_idle_timeout_secs (2 s here, 60 by
// default), and the daemon answers meanwhile.
TEST(DaemonShell, AConnectionWithoutACallIsClosedWhenIdle) {
  DaemonHarness daemon;
  WriteFileOrDie(daemon.dir() + "/ktesiod.toml", "api_idle_timeout_secs = 2\n");
  ASSERT_TRUE(daemon.Start({"--config", daemon.dir() + "/ktesiod.toml"})) << daemon.DaemonLog();
  auto connect_raw = [&] {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, daemon.socket().c_str(), sizeof(address.sun_path) - 1);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    timeval wait{.tv_sec = 30, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
    return fd;
  };
  const int silent = connect_raw();
  const int half = connect_raw();
  const std::string preface = "PRI * HTTP/2.0\r\n";
  ASSERT_EQ(write(half, preface.data(), preface.size()), static_cast<ssize_t>(preface.size()));
  const int whole = connect_raw();
  const std::string complete = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                               std::string("\0\0\0\x04\0\0\0\0\0", 9);  // empty SETTINGS
  ASSERT_EQ(write(whole, complete.data(), complete.size()), static_cast<ssize_t>(complete.size()));
  EXPECT_EQ(daemon.Ctl({"daemon", "status"}).exit_code, 0);
  const auto began = std::chrono::steady_clock::now();
  for (const int fd : {silent, half, whole}) {
    char buffer[256];
    ssize_t n = 0;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0) {
      // the server's own preface (SETTINGS), then nothing but the close
    }
    EXPECT_EQ(n, 0) << "not closed by the daemon: " << std::strerror(errno);
    EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(20))
        << "the connection was not closed as idle";
    close(fd);
  }
}

TEST(DaemonShell, SigtermShutsDownCleanlyAndRemovesSocket) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  EXPECT_EQ(daemon.Stop(), 0);
  struct stat st {};
  EXPECT_NE(lstat(daemon.socket().c_str(), &st), 0);
  EXPECT_NE(daemon.DaemonLog().find("stopped"), std::string::npos);
}

TEST(DaemonShell, NotifiesServiceManagerReady) {
  TempDir dir;
  std::string notify = dir / "notify.sock";
  int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, notify.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(setenv("NOTIFY_SOCKET", notify.c_str(), 1), 0);
  DaemonHarness daemon;
  bool started = daemon.Start();
  unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(started);
  char buffer[64] = {};
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ssize_t n = recv(fd, buffer, sizeof(buffer) - 1, 0);
  close(fd);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buffer, static_cast<size_t>(n)), "READY=1");
}

TEST(Ktctl, UnknownCommandIsUsageError) {
  RunResult r = RunProcess({KtctlPath(), "frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos);
}

TEST(Ktctl, HelpAndVersionExitZero) {
  RunResult help = RunProcess({KtctlPath(), "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("agent register"), std::string::npos);
  TempDir dir;
  RunResult version = RunProcess({KtctlPath(), "--socket", dir / "none.sock", "--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("ktctl 0."), std::string::npos);
  EXPECT_NE(version.out.find("not reachable"), std::string::npos);
  // --json: the client's part only, and the daemon's absence said as a boolean (exit 0 still).
  RunResult json = RunProcess({KtctlPath(), "--socket", dir / "none.sock", "--version", "--json"});
  EXPECT_EQ(json.exit_code, 0);
  std::optional<Json> doc = ParseJson(json.out);
  ASSERT_TRUE(doc.has_value()) << json.out;
  EXPECT_EQ(doc->Keys(),
            (std::vector<std::string>{"schema_version", "client", "socket", "daemon_reachable"}));
  EXPECT_EQ((*doc)["client"].Keys(),
            (std::vector<std::string>{"version", "api_version", "contract_version"}));
  EXPECT_EQ((*doc)["client"]["contract_version"].string, "1.0.0");
  EXPECT_EQ((*doc)["socket"].string, dir / "none.sock");
  EXPECT_FALSE((*doc)["daemon_reachable"].boolean);
}

TEST(Ktctl, VersionNamesReachableDaemon) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  RunResult version = daemon.Ctl({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("ktesiod 0."), std::string::npos) << version.out;
  EXPECT_NE(version.out.find("contract 1.0.0"), std::string::npos) << version.out;
  std::optional<Json> doc = ParseJson(daemon.Ctl({"--version", "--json"}).out);
  ASSERT_TRUE(doc.has_value());
  EXPECT_TRUE((*doc)["daemon_reachable"].boolean);
  EXPECT_EQ((*doc)["daemon"].Keys(),
            (std::vector<std::string>{"version", "api_version", "contract_version"}));
  EXPECT_EQ((*doc)["daemon"]["version"].string, (*doc)["client"]["version"].string);
}

TEST(Ktctl, CompletionScriptsComeFromTheCommandTable) {
  TempDir dir;
  RunResult bash = RunProcess({KtctlPath(), "completion", "bash"});
  ASSERT_EQ(bash.exit_code, 0);
  WriteFileOrDie(dir / "ktctl.bash", bash.out);
  RunResult syntax = RunProcess({"/bin/bash", "-n", dir / "ktctl.bash"});
  EXPECT_EQ(syntax.exit_code, 0) << syntax.err;
  RunResult complete = RunProcess(
      {"/bin/bash", "-c",
       "source " + (dir / "ktctl.bash") +
           "; COMP_WORDS=(ktctl agent me); COMP_CWORD=2; _ktctl; echo \"${COMPREPLY[*]}\""});
  EXPECT_EQ(complete.out, "memory\n") << complete.err;
  // A command's own flags, after its name and after a positional.
  RunResult flags = RunProcess({"/bin/bash", "-c",
                                "source " + (dir / "ktctl.bash") +
                                    "; COMP_WORDS=(ktctl agent stop web --); COMP_CWORD=4; _ktctl; "
                                    "echo \"${COMPREPLY[*]}\""});
  EXPECT_EQ(flags.out, "--all --selector --timeout --socket --json --timeout --help --version\n")
      << flags.err;
  RunResult logs = RunProcess({"/bin/bash", "-c",
                               "source " + (dir / "ktctl.bash") +
                                   "; COMP_WORDS=(ktctl agent logs web -); COMP_CWORD=4; _ktctl; "
                                   "echo \"${COMPREPLY[*]}\""});
  EXPECT_NE(logs.out.find("-f"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("--tail"), std::string::npos) << logs.out;
  for (const char* shell : {"zsh", "fish"}) {
    RunResult r = RunProcess({KtctlPath(), "completion", shell});
    EXPECT_EQ(r.exit_code, 0) << shell;
    EXPECT_NE(r.out.find("register"), std::string::npos) << shell;
  }
  EXPECT_EQ(RunProcess({KtctlPath(), "completion", "tcsh"}).exit_code, 2);
}

TEST(Ktctl, BadGlobalTimeoutIsUsageError) {
  RunResult r = RunProcess({KtctlPath(), "--timeout", "soon", "daemon", "status"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(Ktctl, EngineObservedStartWithoutUpstreamIsRefusedAndChangesNothing) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  // An engine-observed agent must never run unmetered: without an upstream there is no proxy.
  std::string dir = daemon.dir() + "/eo";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  WriteFileOrDie(dir + "/adapter.toml",
                 "contract_version = \"1.0.0\"\n[adapter]\nkind = \"eo\"\n"
                 "[lifecycle.start]\nexec = \"/bin/sleep\"\nargs = [\"60\"]\n"
                 "[capabilities.interaction]\nlinux = \"guaranteed\"\n"
                 "[metering]\nsource = \"engine-observed\"\n");
  ASSERT_EQ(daemon.Ctl({"agent", "register", "m", "--manifest", dir}).exit_code, 0);
  RunResult r = daemon.Ctl({"agent", "start", "m", "--json"});
  EXPECT_EQ(r.exit_code, 2);
  std::optional<Json> doc = ParseJson(r.out);
  ASSERT_TRUE(doc.has_value()) << r.out;
  EXPECT_EQ((*doc)["error"]["reason"].string, "CONFIG_INVALID");
  EXPECT_NE((*doc)["error"]["message"].string.find("metering.upstream_base_url"),
            std::string::npos);
  std::optional<Json> show = ParseJson(daemon.Ctl({"agent", "show", "m", "--json"}).out);
  EXPECT_EQ((*show)["instance"]["state"].string, "registered");
  // A URL carrying a credential is refused at set time, without echoing it.
  r = daemon.Ctl({"agent", "config", "set", "m", "metering.upstream_base_url",
                  "https://user:sk-hidden@example.com/v1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("metering.upstream_base_url"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("sk-hidden"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ktesio::testing
