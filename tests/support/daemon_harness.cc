#include "daemon_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "gtest/gtest.h"

namespace ktesio::testing {

std::string KtesiodPath() { return KTESIO_KTESIOD_PATH; }
std::string KtctlPath() { return KTESIO_KTCTL_PATH; }
std::string ProbePath() { return KTESIO_PROBE_PATH; }

std::string WriteProbeManifest(const std::string& dir, const std::string& kind,
                               const std::string& args, const std::string& extra_toml) {
  std::string quoted;
  std::istringstream in(args);
  for (std::string word; in >> word;) {
    quoted += (quoted.empty() ? "\"" : ", \"") + word + "\"";
  }
  std::filesystem::create_directories(dir);
  WriteFileOrDie(dir + "/adapter.toml",
                 "contract_version = \"1.0.0\"\n[adapter]\nkind = \"" + kind +
                     "\"\n[lifecycle.start]\nexec = \"" + ProbePath() + "\"\nargs = [" + quoted +
                     "]\n[capabilities.pause]\nlinux = \"guaranteed\"\n" +
                     "[metering]\nsource = \"self-reported\"\n" + extra_toml);
  return dir;
}

bool SocketAnswers(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

DaemonHarness::DaemonHarness()
    : state_dir_(dir_ / "state"), socket_(dir_ / "d.sock"), log_path_(dir_ / "ktesiod.log") {}

namespace {

// Agents outlive the daemon by design; a test must not leave them behind. Kills every agent
// group and shim whose files live under `state_dir` (checked through /proc, so a reused pid is
// never hit).
// Kills the agents and shims a test left running: those whose pid files are in `state_dir` and
// whose working directory or command line lies under `root` (the test's whole temp dir: an
// agent may run in its manifest's directory beside the state dir).
void KillLeftoverAgents(const std::string& state_dir, const std::string& root) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(state_dir + "/agents", ec)) {
    const std::string run = entry.path().string() + "/run";
    for (const char* file : {"/agent.pid", "/shim.pid"}) {
      pid_t pid = std::atoi(ReadFileOrEmpty(run + file).c_str());
      if (pid <= 1) {
        continue;
      }
      std::string cwd = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/cwd", ec);
      std::string cmdline = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/cmdline");
      if (cwd.rfind(root, 0) == 0 || cmdline.find(root) != std::string::npos) {
        kill(std::string(file) == "/agent.pid" ? -pid : pid, SIGKILL);
      }
    }
  }
}

}  // namespace

DaemonHarness::~DaemonHarness() {
  if (pid_ > 0) {
    Stop();
  }
  KillLeftoverAgents(state_dir_, dir_.path());
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info != nullptr && info->result() != nullptr && info->result()->Failed()) {
    std::fprintf(stderr, "---- ktesiod stderr (%s) ----\n%s---- end ----\n", log_path_.c_str(),
                 DaemonLog().c_str());
  }
}

bool DaemonHarness::Start(const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {binary_.empty() ? KtesiodPath() : binary_,
                                   "--state-dir",
                                   state_dir_,
                                   "--socket",
                                   socket_,
                                   "--log-level",
                                   "debug"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = fork();
  if (pid_ == 0) {
    int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(log, 1);
    dup2(log, 2);
    setpgid(0, 0);
    // Builtins name `ktesio-probe` by name: put the fixture on the daemon's PATH.
    std::string probe_dir = ProbePath().substr(0, ProbePath().rfind('/'));
    const char* path = std::getenv("PATH");
    setenv("PATH", (probe_dir + ":" + (path == nullptr ? "/usr/bin:/bin" : path)).c_str(), 1);
    for (const std::string& entry : env_) {
      size_t eq = entry.find('=');
      if (eq == std::string::npos) {
        unsetenv(entry.c_str());
      } else {
        setenv(entry.substr(0, eq).c_str(), entry.substr(eq + 1).c_str(), 1);
      }
    }
    std::vector<char*> c_args;
    for (std::string& a : args) {
      c_args.push_back(a.data());
    }
    c_args.push_back(nullptr);
    execv(c_args[0], c_args.data());
    _exit(127);
  }
  return WaitFor([&] {
           int status = 0;
           if (waitpid(pid_, &status, WNOHANG) == pid_) {
             pid_ = -1;
             return true;  // exited: stop waiting, report below
           }
           return SocketAnswers(socket_);
         }) &&
         pid_ > 0;
}

int DaemonHarness::Stop() {
  if (pid_ <= 0) {
    return -1;
  }
  kill(pid_, SIGTERM);
  int status = 0;
  bool exited = WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; },
                        std::chrono::milliseconds(10000));
  if (!exited) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int DaemonHarness::WaitForExit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) {
    return -1;
  }
  int status = 0;
  if (!WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout)) {
    return -2;
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void DaemonHarness::Kill() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

RunResult DaemonHarness::Ctl(const std::vector<std::string>& args,
                             const RunOptions& options) const {
  std::vector<std::string> argv = {KtctlPath(), "--socket", socket_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, options);
}

std::string DaemonHarness::DaemonLog() const { return ReadFileOrEmpty(log_path_); }

}  // namespace ktesio::testing
