#include "spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace ktesio::daemon::shim {

// Closes every fd >= 3 except `keep`: the agent must not inherit the shim's log, FIFO or
// handshake descriptors, nor anything the daemon leaked into the shim.
void CloseOtherFds(int keep) {
  bool ok = (keep <= 3 || close_range(3, static_cast<unsigned>(keep) - 1, 0) == 0) &&
            close_range(static_cast<unsigned>(keep) + 1, ~0U, 0) == 0;
  if (ok) {
    return;
  }
  // Kernels before 5.9 lack close_range: walk /proc/self/fd instead (the shim is
  // single-threaded, so allocating after fork is safe).
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) {
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (max > 0 ? max : 65536); ++fd) {
      if (fd != keep) {
        close(fd);
      }
    }
    return;
  }
  int own = dirfd(d);
  while (dirent* entry = readdir(d)) {
    int fd = std::atoi(entry->d_name);
    if (fd >= 3 && fd != keep && fd != own) {
      close(fd);
    }
  }
  closedir(d);
}

void ResetSignals() {
  for (int sig = 1; sig < NSIG; ++sig) {
    signal(sig, SIG_DFL);  // Fails harmlessly for SIGKILL, SIGSTOP and reserved numbers.
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

namespace {

[[noreturn]] void Fail(int error_fd) {
  int err = errno;
  while (write(error_fd, &err, sizeof(err)) < 0 && errno == EINTR) {
  }
  _exit(127);
}

[[noreturn]] void RunChild(char* const* argv, const std::string& cwd, const AgentStdio& stdio,
                           int error_fd) {
  if (setsid() < 0 || dup2(stdio.in, 0) < 0 || dup2(stdio.out, 1) < 0 || dup2(stdio.err, 2) < 0 ||
      chdir(cwd.c_str()) != 0) {
    Fail(error_fd);
  }
  ResetSignals();
  umask(022);
  CloseOtherFds(error_fd);
  execvp(argv[0], argv);  // glibc searches the PATH of our environ, which is the agent's.
  Fail(error_fd);
}

}  // namespace

SpawnResult SpawnAgent(const std::vector<std::string>& command, const std::string& cwd,
                       const AgentStdio& stdio) {
  std::vector<char*> argv;
  for (const std::string& arg : command) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);

  SpawnResult result;
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    result.error = errno;
    return result;
  }
  pid_t pid = fork();
  if (pid < 0) {
    result.error = errno;
    close(error_pipe[0]);
    close(error_pipe[1]);
    return result;
  }
  if (pid == 0) {
    close(error_pipe[0]);
    RunChild(argv.data(), cwd, stdio, error_pipe[1]);
  }
  close(error_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(error_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(error_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    // The child reports before its _exit, so this wait is immediate.
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    result.error = child_errno != 0 ? child_errno : EIO;
    return result;
  }
  result.pid = pid;
  return result;
}

}  // namespace ktesio::daemon::shim
