#include "process/shim_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "process/spawn_attributes.h"
#include "shim/launcher_protocol.h"

namespace ktesio::daemon::process {
namespace {

// How long the launcher may take to greet after its exec, and to answer a request (a fork).
constexpr int kHelloTimeoutMs = 5000;
constexpr int kAnswerTimeoutMs = 10000;

// What came back from the launcher.
struct Answer {
  enum class Kind {
    kValue,    // `value` holds it
    kUnread,   // it closed its end with the request still queued (ECONNRESET): never read
    kMissing,  // no answer in time, it ended after reading, or the read failed (`error`)
  };
  Kind kind = Kind::kMissing;
  int32_t value = 0;
  std::string error;
};

// One int32 from the launcher within `timeout_ms`.
Answer ReadAnswer(int socket, int timeout_ms) {
  Answer answer;
  pollfd pfd{socket, POLLIN, 0};
  int ready = 0;
  do {
    ready = poll(&pfd, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  if (ready <= 0) {
    answer.error = ready == 0 ? absl::StrCat("no answer within ", timeout_ms / 1000, " s")
                              : absl::StrCat("poll: ", std::strerror(errno));
    return answer;
  }
  ssize_t got = 0;
  do {
    got = recv(socket, &answer.value, sizeof(answer.value), 0);
  } while (got < 0 && errno == EINTR);
  if (got == sizeof(answer.value) && answer.value != 0) {
    answer.kind = Answer::Kind::kValue;
  } else if (got < 0 && errno == ECONNRESET) {
    // A Unix socket closed with data still in its receive queue resets its peer; one that had
    // read everything sent ends it (got == 0) instead.
    answer.kind = Answer::Kind::kUnread;
    answer.error = std::strerror(ECONNRESET);
  } else {
    answer.error = got == 0 ? "its end" : got < 0 ? std::strerror(errno) : "a malformed answer";
  }
  return answer;
}

}  // namespace

ShimLauncher::~ShimLauncher() { Stop(); }

bool ShimLauncher::Start(const std::string& shim_path) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    log_->warn("shim launcher: cannot create its socket: {}; this shim is exec'd",
               std::strerror(errno));
    return false;
  }
  // argv: the path, the flag, then the filler that makes the title area.
  std::vector<char*> argv;
  std::string path = shim_path;
  std::string flag(shim::kLauncherFlag);
  std::string filler(
      shim::LauncherFillerBytes(shim_path, static_cast<size_t>(sysconf(_SC_PAGESIZE))), 'x');
  argv.push_back(path.data());
  argv.push_back(flag.data());
  argv.push_back(filler.data());
  argv.push_back(nullptr);
  char* env[] = {nullptr};  // each request brings its shim's environment
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pair[1], 3);  // stderr stays the daemon's
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  posix_spawnattr_t attr;
  InitDetachedSpawnAttributes(&attr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, shim_path.c_str(), &actions, &attr, argv.data(), env);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(pair[1]);
  if (rc != 0) {
    close(pair[0]);
    log_->warn("shim launcher: cannot start {}: {}; this shim is exec'd", shim_path,
               std::strerror(rc));
    return false;
  }
  pid_ = pid;
  socket_ = pair[0];
  path_ = shim_path;
  const Answer hello = ReadAnswer(socket_, kHelloTimeoutMs);
  if (hello.kind != Answer::Kind::kValue || hello.value != shim::kLauncherHello) {
    log_->warn("shim launcher: {} did not start as one ({}); its shims are exec'd", shim_path,
               hello.error.empty() ? "it does not speak the protocol" : hello.error);
    Stop();
    refused_path_ = shim_path;
    return false;
  }
  return true;
}

void ShimLauncher::Stop() {
  if (socket_ >= 0) {
    close(socket_);  // the launcher's end of file: it returns
    socket_ = -1;
  }
  if (pid_ > 0) {
    // It ends at once at end of file; one that does not (stopped, wedged) is killed.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (waitpid(pid_, nullptr, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        log_->warn("shim launcher (pid {}) did not end at the end of its socket; killed", pid_);
        kill(pid_, SIGKILL);
        while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    pid_ = 0;
  }
  path_.clear();
}

ShimLauncher::Result ShimLauncher::Launch(const std::string& shim_path,
                                          const std::vector<std::string>& argv,
                                          const std::vector<std::string>& env, int stderr_fd,
                                          int ready_fd) {
  Result result;
  if (socket_ >= 0 && path_ != shim_path) {
    Stop();  // the shim was found elsewhere since: fork the binary that is asked for
  }
  if (socket_ < 0) {
    if (shim_path == refused_path_) {
      return result;
    }
    if (!Start(shim_path)) {
      return result;
    }
  }
  const std::string request = shim::EncodeLaunchRequest(argv, env);
  if (request.size() > shim::kLauncherMaxRequest) {
    return result;  // a very large environment: exec'd
  }
  std::array<int, 2> fds = {stderr_fd, ready_fd};
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(fds))> control{};
  iovec iov{const_cast<char*>(request.data()), request.size()};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(header), fds.data(), sizeof(fds));
  ssize_t sent = 0;
  do {
    sent = sendmsg(socket_, &message, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(request.size())) {
    const int err = errno;
    if (sent < 0 && (err == EMSGSIZE || err == ENOBUFS)) {
      return result;  // too large for the socket: exec'd, and the launcher serves the next one
    }
    // Not received, so nothing was forked: a launcher that died (EPIPE) is replaced at the next
    // launch.
    log_->warn("shim launcher (pid {}) cannot be reached: {}; it is replaced", pid_,
               sent < 0 ? std::strerror(err) : "a short send");
    Stop();
    return result;
  }
  const Answer answer = ReadAnswer(socket_, kAnswerTimeoutMs);
  if (answer.kind == Answer::Kind::kValue && answer.value > 0) {
    result.outcome = Outcome::kForked;
    result.pid = answer.value;
    return result;
  }
  if (answer.kind == Answer::Kind::kValue && answer.value < 0) {
    // Declined (E2BIG, EPROTO) or the fork failed: nothing was forked, so exec'd instead (an
    // exec that fails alike reports it).
    if (answer.value != -E2BIG) {
      log_->warn("shim launcher (pid {}) did not fork: {}; this shim is exec'd", pid_,
                 std::strerror(-answer.value));
    }
    return result;
  }
  if (answer.kind == Answer::Kind::kUnread) {
    log_->warn("shim launcher (pid {}) ended before reading a request; it is replaced", pid_);
    Stop();
    return result;  // nothing forked: exec'd instead
  }
  result.outcome = Outcome::kFailed;
  // Read, then no answer: whether it forked is unknown. A shim it forked finds the handshake
  // pipe without a reader once the caller closes it, and kills its agent.
  result.message = absl::StrCat("the shim launcher (pid ", pid_, ") gave ", answer.error,
                                " instead of an answer; it is replaced");
  Stop();
  return result;
}

}  // namespace ktesio::daemon::process
