#pragma once

// The single-instance lock on a state dir: an exclusive flock on <state>/ktesiod.lock held for
// the daemon's lifetime. The kernel drops it when the process dies, so a crash never leaves a
// stale lock behind.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ktesio::daemon::server {

class InstanceLock {
 public:
  // Errors: FAILED_PRECONDITION/INVALID_STATE when another daemon holds it (its pid named),
  // INTERNAL/IO_ERROR otherwise.
  static absl::StatusOr<std::unique_ptr<InstanceLock>> Acquire(const std::string& state_dir);
  ~InstanceLock();
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;

 private:
  explicit InstanceLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace ktesio::daemon::server
