// Runs the real ktesio-shim with ktesio-probe as the agent: handshake, exit records, process
// hygiene, stdin, and survival of the process that started the shim.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "shim_test_util.h"

namespace ktesio::daemon::shim::testing {
namespace {

const std::string kProbe = KTESIO_PROBE_PATH;

// The agent's pid from agent.pid; fails the test (rather than return 0, which kill() would read
// as "my own process group") when it is missing.
pid_t AgentPid(const TempDir& dir) {
  pid_t pid = std::atoi(ReadFile(dir.run_dir() + "/agent.pid").value_or("0").c_str());
  EXPECT_GT(pid, 1);
  return pid > 1 ? pid : 999999999;
}

std::string Exit(const TempDir& dir) { return ReadFile(dir.run_dir() + "/exit").value_or(""); }

bool WaitForExitRecord(const TempDir& dir) {
  return WaitUntil([&] { return !Exit(dir).empty(); });
}

bool LogContains(const TempDir& dir, std::string_view needle) {
  return ReadLog(dir.log_dir()).find(needle) != std::string::npos;
}

TEST(ShimRunTest, HandshakeNamesAgentAndShimAndPidFilesAgree) {
  TempDir dir;
  ShimProcess shim(dir, {{kProbe}});
  std::optional<std::string> ready = shim.ReadyText();
  ASSERT_TRUE(ready);
  int agent = 0;
  int shim_pid = 0;
  ASSERT_EQ(std::sscanf(ready->c_str(), "started %d %d\n", &agent, &shim_pid), 2) << *ready;
  EXPECT_EQ(*ready, "started " + std::to_string(agent) + " " + std::to_string(shim_pid) + "\n");
  EXPECT_EQ(shim_pid, shim.pid());
  // The pid records: the pid padded to ten characters (shim/pid_record.h).
  auto record = [](int pid) {
    std::string line = std::to_string(pid);
    return line + std::string(10 - line.size(), ' ') + "\n";
  };
  EXPECT_EQ(ReadFile(dir.run_dir() + "/agent.pid"), record(agent));
  EXPECT_EQ(ReadFile(dir.run_dir() + "/shim.pid"), record(shim_pid));
  // The agent is the shim's child and leads its own session and process group.
  EXPECT_EQ(ProcStat(agent, 1), std::to_string(shim_pid));
  EXPECT_EQ(ProcStat(agent, 2), std::to_string(agent));
  EXPECT_EQ(ProcStat(agent, 3), std::to_string(agent));
  ASSERT_TRUE(WaitUntil([&] { return LogContains(dir, "probe started pid="); }));
  EXPECT_TRUE(Exit(dir).empty());
  ASSERT_EQ(kill(agent, SIGKILL), 0);
  ASSERT_TRUE(WaitForExitRecord(dir));
  EXPECT_EQ(Exit(dir), "signaled 9\n");
  std::optional<int> status = shim.Wait();
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

TEST(ShimRunTest, RecordsTheExitCode) {
  TempDir dir;
  ShimProcess shim(dir, {{kProbe, "--exit-immediately", "--exit-code", "7"}});
  EXPECT_TRUE(shim.ReadyText().value_or("").starts_with("started "));
  std::optional<int> status = shim.Wait();
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_EQ(Exit(dir), "exited 7\n");
  EXPECT_FALSE(ReadFile(dir.run_dir() + "/exit.tmp"));
}

// The daemon died between spawning the shim and reading its handshake: the spawn record was
// never committed, so no daemon will re-adopt the agent. The shim kills it rather than let it
// run on unsupervised (a restarted daemon would start a second copy), and records the exit.
TEST(ShimRunTest, KillsTheAgentWhenTheLauncherIsGoneBeforeTheHandshake) {
  TempDir dir;
  ShimArgs args({kProbe, "--heartbeat-ms", "20"});
  args.reader_gone = true;
  ShimProcess shim(dir, args);
  std::optional<int> status = shim.Wait();
  ASSERT_TRUE(status) << "the shim (and its agent) ran on without a daemon";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_EQ(Exit(dir), "signaled 9\n");
  const pid_t agent = AgentPid(dir);
  EXPECT_TRUE(WaitUntil([&] { return kill(agent, 0) != 0; })) << "agent " << agent << " alive";
}

TEST(ShimRunTest, RecordsTheSignal) {
  TempDir dir;
  ShimProcess shim(dir, {{kProbe, "--signal-after-ms", "20", "--signal", "SEGV"}});
  ASSERT_TRUE(shim.Wait());
  EXPECT_EQ(Exit(dir), "signaled 11\n");
}

TEST(ShimRunTest, ReportsExecFailure) {
  TempDir dir;
  ShimProcess shim(dir, {{"ktesio-no-such-program-xyz", "arg"}});
  EXPECT_EQ(shim.ReadyText(), "exec-failed 2 No such file or directory\n");
  std::optional<int> status = shim.Wait();
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_EQ(Exit(dir), "exec-failed 2\n");
  EXPECT_FALSE(ReadFile(dir.run_dir() + "/agent.pid"));
}

TEST(ShimRunTest, ReportsANonExecutableFile) {
  TempDir dir;
  std::string file = dir.File("not-executable");
  ASSERT_TRUE(std::ofstream(file) << "#!/bin/sh\n") << file;
  ShimProcess shim(dir, {{file}});
  EXPECT_EQ(shim.ReadyText(), "exec-failed 13 Permission denied\n");
  ASSERT_TRUE(shim.Wait());
  EXPECT_EQ(Exit(dir), "exec-failed 13\n");
}

TEST(ShimRunTest, RejectsUsageErrorsWith64) {
  TempDir dir;
  ShimProcess shim(dir, {{kProbe}, {"--keep", "0"}});
  std::optional<int> status = shim.Wait();
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 64);
  EXPECT_FALSE(ReadFile(dir.run_dir() + "/shim.pid"));
}

TEST(ShimRunTest, GivesTheAgentACleanContextAndItsEnvironment) {
  TempDir dir;
  std::string dump = dir.File("dump.json");
  ShimProcess shim(
      dir, {{"ktesio-probe", "--dump", dump, "--print-env", "KT_SHIM_X", "--exit-immediately",
             "--exit-code", "0"},
            {},
            {"KT_SHIM_X=hello there", "PATH=" + kProbe.substr(0, kProbe.rfind('/')) + ":/bin"}});
  ASSERT_TRUE(shim.Wait());
  EXPECT_EQ(Exit(dir), "exited 0\n");  // Found through the PATH of the agent's environment.
  std::string text = ReadFile(dump).value_or("");
  EXPECT_NE(text.find("\"stdin_kind\":\"devnull\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"open_fds\":[0,1,2]"), std::string::npos) << text;
  EXPECT_NE(text.find("\"blocked_signals\":[]"), std::string::npos) << text;
  EXPECT_NE(text.find("\"ignored_signals\":[]"), std::string::npos) << text;
  EXPECT_NE(text.find("\"cwd\":\"" + dir.path() + "\""), std::string::npos) << text;
  EXPECT_TRUE(LogContains(dir, " agent-out env KT_SHIM_X=hello there\n"));
}

TEST(ShimRunTest, KillsLeftoverDescendantsWhenTheAgentExits) {
  TempDir dir;
  std::string pids = dir.File("pids");
  ShimProcess shim(dir, {{kProbe, "--spawn-children", "2", "--pid-file", pids, "--crash-after-ms",
                          "300", "--exit-code", "3"}});
  ASSERT_TRUE(WaitUntil([&] { return SplitLines(ReadFile(pids).value_or("")).size() == 3; }));
  std::vector<std::string> lines = SplitLines(*ReadFile(pids));
  ASSERT_TRUE(shim.Wait());
  EXPECT_EQ(Exit(dir), "exited 3\n");
  for (std::size_t i = 1; i < lines.size(); ++i) {
    pid_t child = std::stoi(lines[i]);
    EXPECT_TRUE(WaitUntil([&] { return IsDead(child); })) << "child " << child << " survived";
  }
}

TEST(ShimRunTest, IgnoresStrayTerminationSignals) {
  TempDir dir;
  ShimProcess shim(dir, {{kProbe}});
  ASSERT_TRUE(shim.ReadyText());
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) {
    ASSERT_EQ(kill(shim.pid(), sig), 0);
  }
  EXPECT_FALSE(shim.Wait(std::chrono::milliseconds(200)));
  pid_t agent = AgentPid(dir);
  ASSERT_EQ(kill(-agent, SIGTERM), 0);  // The daemon's way to stop: signal the agent's group.
  ASSERT_TRUE(shim.Wait());
  EXPECT_EQ(Exit(dir), "signaled 15\n");
}

TEST(ShimRunTest, DeliversStdinThroughTheFifoAcrossWriters) {
  TempDir dir;
  ShimProcess shim(dir, {{kProbe, "--echo", "--exit-on-eof"}, {"--stdin-fifo"}});
  ASSERT_TRUE(shim.ReadyText());
  std::string fifo = dir.run_dir() + "/stdin";
  struct stat st {};
  ASSERT_EQ(stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Two writers in turn, like two daemon incarnations: closing the first must not give the agent
  // EOF (it would exit, --exit-on-eof).
  for (const char* word : {"first", "second"}) {
    int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(fd, 0) << "no reader on the FIFO";
    std::string line = std::string(word) + "\n";
    ASSERT_EQ(write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    close(fd);
    ASSERT_TRUE(WaitUntil([&] { return LogContains(dir, " agent-out echo: " + line); }));
  }
  EXPECT_TRUE(Exit(dir).empty());
  pid_t agent = AgentPid(dir);
  ASSERT_EQ(kill(agent, SIGKILL), 0);
  ASSERT_TRUE(shim.Wait());
}

// The daemon double-forks: the shim's parent exits at once, and the daemon itself may die later.
// The shim must carry on capturing and still record the exit.
TEST(ShimRunTest, KeepsCapturingAfterTheLauncherDies) {
  // Become a subreaper so the orphaned shim is re-parented to this test and can be reaped here.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  TempDir dir;
  pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    ShimProcess shim(dir, {{kProbe, "--heartbeat-ms", "20"}, {}, {}, false});
    pause();  // Killed by the test; the destructor never runs, so the shim is not killed.
    _exit(0);
  }
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(dir.run_dir() + "/agent.pid").has_value(); }));
  pid_t shim = std::atoi(ReadFile(dir.run_dir() + "/shim.pid").value_or("0").c_str());
  ASSERT_GT(shim, 1);
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  ASSERT_EQ(waitpid(launcher, nullptr, 0), launcher);
  ASSERT_TRUE(WaitUntil([&] { return ProcStat(shim, 1) == std::to_string(getpid()); }));
  auto beats = [&] {
    std::string log = ReadLog(dir.log_dir());
    std::size_t n = 0;
    for (std::size_t at = log.find(" heartbeat "); at != std::string::npos;
         at = log.find(" heartbeat ", at + 1)) {
      ++n;
    }
    return n;
  };
  std::size_t before = beats();
  ASSERT_TRUE(WaitUntil([&] { return beats() >= before + 5; }));
  pid_t agent = AgentPid(dir);
  ASSERT_EQ(kill(agent, SIGKILL), 0);
  ASSERT_TRUE(WaitForExitRecord(dir));
  EXPECT_EQ(Exit(dir), "signaled 9\n");
  int status = 0;
  EXPECT_TRUE(WaitUntil([&] { return waitpid(shim, &status, WNOHANG) == shim; }));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

}  // namespace
}  // namespace ktesio::daemon::shim::testing
