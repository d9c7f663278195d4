#pragma once

// The daemon ktesio-tck certifies against by default: a private ktesiod on a temp state dir and
// socket (/tmp/kt-tck-XXXXXX), stopped and cleaned up when the run ends. Part of the ktesio-tck
// binary, not of the kit library.

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ktesio::tck {

// True when a ktesio.v1 daemon answers GetVersion on the Unix socket `socket` within 2 s.
bool DaemonAnswers(const std::string& socket);

// Owns one private ktesiod process and its directory. Not thread-safe.
class PrivateDaemon {
 public:
  // Starts `ktesiod` (an executable path) with the directory of `probe` prepended to its PATH,
  // and waits up to 15 s for it to answer on its socket. INTERNAL when the temp dir or the fork
  // cannot be made; UNAVAILABLE when ktesiod exits during startup or does not answer in time
  // (the message quotes its log). Whatever was started is stopped and removed on failure.
  static absl::StatusOr<std::unique_ptr<PrivateDaemon>> Start(const std::string& ktesiod,
                                                              const std::string& probe);
  // Stops the daemon (SIGTERM, SIGKILL after 10 s), kills any agent it left running and removes
  // its directory.
  ~PrivateDaemon();
  PrivateDaemon(const PrivateDaemon&) = delete;
  PrivateDaemon& operator=(const PrivateDaemon&) = delete;

  const std::string& socket() const { return socket_; }

 private:
  PrivateDaemon() = default;
  // Forks and execs ktesiod (stdout and stderr to its log). INTERNAL when fork fails.
  absl::Status Launch(const std::string& ktesiod, const std::string& probe);
  // Waits for the launched daemon to answer; UNAVAILABLE as Start() describes.
  absl::Status AwaitAnswer();

  pid_t pid_ = -1;
  std::string dir_;
  std::string state_;
  std::string socket_;
  std::string log_;
};

}  // namespace ktesio::tck
