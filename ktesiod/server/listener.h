#pragma once

// The daemon's Unix socket: creation with the right mode and group, stale-socket replacement,
// socket activation, and an accept loop that records each connection's peer credentials
// (SO_PEERCRED) before handing the connection to gRPC.

#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server.h"

namespace ktesio::daemon::server {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // the peer's supplementary groups at connect time (SO_PEERGROUPS)
};

// Who may call the API: root, the daemon's own uid, and (when set) members of `group`: the
// peer's effective or supplementary group at connect time, or the group database's membership
// of the peer's user.
struct AccessPolicy {
  uid_t owner_uid = 0;
  std::optional<gid_t> group;
  bool Allows(const PeerCredentials& peer) const;
};

// Maps gRPC peer strings ("fd:N") to the credentials captured at accept time.
// Thread-safe.
class PeerTable {
 public:
  void Record(int fd, const PeerCredentials& credentials);
  // Returns nullopt for an unknown peer string.
  std::optional<PeerCredentials> Lookup(const std::string& grpc_peer) const;

 private:
  mutable absl::Mutex mu_;
  std::map<int, PeerCredentials> by_fd_ ABSL_GUARDED_BY(mu_);
};

class Listener {
 public:
  // Creates the socket at `path`: parent directory created 0700 (user) or 0750 (system); a
  // leftover socket is replaced only when nothing answers on it. Errors: FAILED_PRECONDITION/
  // INVALID_STATE when another daemon answers on `path` or `path` is not a socket,
  // INVALID_ARGUMENT when the path is too long, INTERNAL/IO_ERROR otherwise.
  static absl::StatusOr<std::unique_ptr<Listener>> Bind(const std::string& path, mode_t mode,
                                                        std::optional<gid_t> group);
  // Adopts a listening socket passed by the service manager (LISTEN_FDS). Errors:
  // INVALID_ARGUMENT when fd is not a listening Unix stream socket.
  static absl::StatusOr<std::unique_ptr<Listener>> Adopt(int fd, const std::string& path);

  ~Listener();

  // Starts the accept loop; every connection's credentials go to `peers`, then the connection
  // is added to `server`.
  void Serve(grpc::Server* server, PeerTable* peers);
  // Stops accepting and removes the socket file (when we created it).
  void Shutdown();

  const std::string& path() const { return path_; }

 private:
  Listener(int fd, std::string path, bool owns_path);
  void AcceptLoop(grpc::Server* server, PeerTable* peers);

  int fd_ = -1;
  int wake_fd_ = -1;
  std::string path_;
  bool owns_path_ = false;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Returns the fd passed by systemd socket activation (LISTEN_PID/LISTEN_FDS), or nullopt.
std::optional<int> InheritedListenFd();

}  // namespace ktesio::daemon::server
