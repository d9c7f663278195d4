#include "server/instance_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "ktesio/contract/error.h"

namespace ktesio::daemon::server {

namespace reason = contract::reason;

absl::StatusOr<std::unique_ptr<InstanceLock>> InstanceLock::Acquire(const std::string& state_dir) {
  const std::string path = state_dir + "/ktesiod.lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return contract::MakeError(absl::StatusCode::kInternal, reason::kIoError,
                               absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char buffer[32] = {};
    ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
    close(fd);
    if (err == EWOULDBLOCK) {
      std::string holder = n > 0 ? std::string(absl::StripAsciiWhitespace(buffer)) : "unknown";
      return contract::MakeError(absl::StatusCode::kFailedPrecondition, reason::kInvalidState,
                                 absl::StrCat("another ktesiod (pid ", holder,
                                              ") already owns the state dir ", state_dir));
    }
    return contract::MakeError(absl::StatusCode::kInternal, reason::kIoError,
                               absl::StrCat("cannot lock ", path, ": ", std::strerror(err)));
  }
  std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The pid is informational only; the lock itself is held.
  }
  return std::unique_ptr<InstanceLock>(new InstanceLock(fd));
}

InstanceLock::~InstanceLock() {
  if (fd_ >= 0) {
    close(fd_);
  }
}

}  // namespace ktesio::daemon::server
