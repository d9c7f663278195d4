#pragma once

// The run dir's pid records (docs/shim.md, "Files"), shared by the shim,
// which writes them, and the daemon's process backend, which clears them before a launch and
// reads them after a crash. POSIX only: the shim includes it.
//
// Each record is one line of a fixed width, the pid padded with spaces ("12345     \n"; only
// spaces for none, so that `kill $(cat agent.pid)` of a cleared record is an error, never
// `kill 0`), rewritten in place: a run dir's records keep their inodes from one run to the next.
// A new file per write (a temporary renamed over the record) allocated an inode and freed one
// every time, and on ext4 an allocation scans past recently freed inodes: with a hundred
// agents starting at once that was half of the shims' CPU time. A record is rewritten by one
// write of the same length, so a reader sees the old line or the new one; one racing the copy
// itself could see a mix of the two, and one racing the creation an empty file. Every reader
// checks the pid it reads against the live process anyway: a stale, torn or blank record is at
// worst "no process", as a missing one is.

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace ktesio::daemon::shim {

inline constexpr const char* kShimPidFile = "shim.pid";
inline constexpr const char* kAgentPidFile = "agent.pid";

// "%-10d\n": a pid_t has at most 10 digits.
inline constexpr size_t kPidRecordBytes = 11;

// Writes `pid` as `path`'s record, in place; 0 (none) clears it to a blank line. When the file does
// not exist it is created, unless `create` is false (a record that is not there needs no clearing).
// Returns 0, or the errno of the step that failed.
inline int WritePidRecord(const std::string& path, pid_t pid, bool create) {
  // O_NONBLOCK: a FIFO in the record's place fails the open instead of blocking it.
  const int flags = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT : 0);
  const int fd = open(path.c_str(), flags, 0600);
  if (fd < 0) {
    return !create && errno == ENOENT ? 0 : errno;
  }
  char line[kPidRecordBytes + 1];
  if (pid > 0) {
    std::snprintf(line, sizeof(line), "%-10d\n", static_cast<int>(pid));
  } else {
    std::snprintf(line, sizeof(line), "%10s\n", "");
  }
  int err = 0;
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    err = errno;
  } else if (!S_ISREG(info.st_mode)) {
    err = EINVAL;  // something else in the record's place: never write into a FIFO or device
  } else {
    ssize_t n = -1;
    do {
      n = pwrite(fd, line, kPidRecordBytes, 0);
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(kPidRecordBytes)) {
      err = n < 0 ? errno : EIO;
    } else if (info.st_size > static_cast<off_t>(kPidRecordBytes) &&
               ftruncate(fd, static_cast<off_t>(kPidRecordBytes)) != 0) {
      err = errno;  // a longer record of another format: cut to this one's length
    }
  }
  close(fd);
  return err;
}

}  // namespace ktesio::daemon::shim
