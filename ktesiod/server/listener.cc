#include "server/listener.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "fs/fs.h"
#include "grpcpp/server_posix.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "paths/paths.h"

namespace ktesio::daemon::server {
namespace {

namespace reason = contract::reason;

absl::Status Errno(std::string_view what, const std::string& path) {
  return contract::MakeError(
      absl::StatusCode::kInternal, reason::kIoError,
      absl::StrCat(std::string(what), " ", path, ": ", std::strerror(errno)));
}

bool FillAddress(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr->sun_path)) {
    return false;
  }
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

// True when something accepts connections on `path`.
bool SomethingAnswers(const std::string& path) {
  sockaddr_un addr;
  if (!FillAddress(path, &addr)) {
    return false;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  bool answered = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return answered;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
}

// The connecting process's supplementary groups; empty when the kernel cannot say.
std::vector<gid_t> PeerGroups(int fd) {
  std::vector<gid_t> groups(32);
  for (int attempt = 0; attempt < 2; ++attempt) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE) {
      break;
    }
    groups.resize(len / sizeof(gid_t) + 1);  // the kernel reported the size it needs
  }
  return {};
}

bool UserInGroup(uid_t uid, gid_t gid) {
  passwd pw{};
  passwd* result = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(uid, &pw, buffer.data(), buffer.size(), &result) != 0 || result == nullptr) {
    return false;
  }
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<size_t>(count));
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) {
      return false;
    }
  }
  for (int i = 0; i < count; ++i) {
    if (groups[static_cast<size_t>(i)] == gid) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool AccessPolicy::Allows(const PeerCredentials& peer) const {
  if (peer.uid == 0 || peer.uid == owner_uid) {
    return true;
  }
  if (group.has_value()) {
    return peer.gid == *group ||
           std::find(peer.groups.begin(), peer.groups.end(), *group) != peer.groups.end() ||
           UserInGroup(peer.uid, *group);
  }
  return false;
}

void PeerTable::Record(int fd, const PeerCredentials& credentials) {
  absl::MutexLock lock(&mu_);
  by_fd_[fd] = credentials;
}

std::optional<PeerCredentials> PeerTable::Lookup(const std::string& grpc_peer) const {
  // gRPC names connections added from an fd "fd:<n>".
  std::string_view view = grpc_peer;
  if (view.substr(0, 3) != "fd:") {
    return std::nullopt;
  }
  int fd = 0;
  if (!absl::SimpleAtoi(std::string(view.substr(3)), &fd)) {
    return std::nullopt;
  }
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) {
    return std::nullopt;
  }
  return it->second;
}

absl::StatusOr<std::unique_ptr<Listener>> Listener::Bind(const std::string& path, mode_t mode,
                                                         std::optional<gid_t> group) {
  KT_RETURN_IF_ERROR(ValidateSocketPath(path));
  sockaddr_un addr;
  FillAddress(path, &addr);
  const std::string dir = DirName(path);
  KT_RETURN_IF_ERROR(fs::MakeDirs(dir, group.has_value() ? 0750 : 0700));
  if (group.has_value()) {
    if (chown(dir.c_str(), static_cast<uid_t>(-1), *group) != 0) {
      return Errno("cannot set the group of", dir);
    }
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return contract::MakeError(
          absl::StatusCode::kFailedPrecondition, reason::kInvalidState,
          absl::StrCat(path, " exists and is not a socket; refusing to replace it"));
    }
    if (SomethingAnswers(path)) {
      return contract::MakeError(absl::StatusCode::kFailedPrecondition, reason::kInvalidState,
                                 absl::StrCat("another daemon is answering on ", path,
                                              "; stop it first or choose another --socket"));
    }
    if (unlink(path.c_str()) != 0) {
      return Errno("cannot remove stale socket", path);
    }
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return Errno("cannot create socket for", path);
  }
  // Create the socket with no permissions for anyone else, then widen to `mode`: there is no
  // window in which another user could connect.
  mode_t old_umask = umask(0177);
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old_umask);
  if (rc != 0) {
    absl::Status status = Errno("cannot bind", path);
    close(fd);
    return status;
  }
  if ((group.has_value() && chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) ||
      chmod(path.c_str(), mode) != 0 || listen(fd, 128) != 0) {
    absl::Status status = Errno("cannot prepare socket", path);
    close(fd);
    unlink(path.c_str());
    return status;
  }
  return std::unique_ptr<Listener>(new Listener(fd, path, true));
}

absl::StatusOr<std::unique_ptr<Listener>> Listener::Adopt(int fd, const std::string& path) {
  int type = 0;
  socklen_t len = sizeof(type);
  int accepting = 0;
  socklen_t len2 = sizeof(accepting);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
      getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len2) != 0 || accepting == 0) {
    return contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument,
                               "inherited fd 3 is not a listening stream socket");
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  return std::unique_ptr<Listener>(new Listener(fd, path, false));
}

Listener::Listener(int fd, std::string path, bool owns_path)
    : fd_(fd), wake_fd_(eventfd(0, EFD_CLOEXEC)), path_(std::move(path)), owns_path_(owns_path) {}

Listener::~Listener() { Shutdown(); }

void Listener::Serve(grpc::Server* server, PeerTable* peers) {
  thread_ = std::thread([this, server, peers] { AcceptLoop(server, peers); });
}

void Listener::AcceptLoop(grpc::Server* server, PeerTable* peers) {
  while (!stopping_.load()) {
    // Sleeps until a client connects or Shutdown() writes the wake fd: no periodic wake-ups.
    pollfd pfds[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int ready = poll(pfds, 2, -1);
    if (ready <= 0 || (pfds[1].revents & POLLIN) != 0) {
      continue;
    }
    int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    PeerCredentials peer;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      peer = PeerCredentials{cred.pid, cred.uid, cred.gid, PeerGroups(conn)};
    } else {
      // Unknown credentials are treated as an unprivileged stranger.
      peer = PeerCredentials{0, static_cast<uid_t>(-1), static_cast<gid_t>(-1), {}};
    }
    peers->Record(conn, peer);
    grpc::AddInsecureChannelFromFd(server, conn);
  }
}

void Listener::Shutdown() {
  stopping_.store(true);
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof(one));
    (void)ignored;
  }
  if (thread_.joinable()) {
    thread_.join();
  }
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
    if (owns_path_) {
      unlink(path_.c_str());
    }
  }
  if (wake_fd_ >= 0) {
    close(wake_fd_);
    wake_fd_ = -1;
  }
}

std::optional<int> InheritedListenFd() {
  const char* pid = std::getenv("LISTEN_PID");
  const char* fds = std::getenv("LISTEN_FDS");
  int listen_pid = 0;
  int count = 0;
  if (pid == nullptr || fds == nullptr || !absl::SimpleAtoi(pid, &listen_pid) ||
      !absl::SimpleAtoi(fds, &count) || listen_pid != getpid() || count < 1) {
    return std::nullopt;
  }
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  return 3;  // SD_LISTEN_FDS_START
}

}  // namespace ktesio::daemon::server
