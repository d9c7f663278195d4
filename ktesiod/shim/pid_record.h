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
#include <cstdlib>
#include <limits>
#include <string>

namespace ktesio::daemon::shim {

inline constexpr const char* kShimPidFile = "shim.pid";
inline constexpr const char* kAgentPidFile = "agent.pid";

// "%-10d\n": a pid_t has at most 10 digits.
inline constexpr size_t kPidRecordBytes = 11;

namespace pid_record_internal {

// Writes the record `line` (kPidRecordBytes long) into `path` in place, creating the file when
// `create`. Returns 0, or the errno of the step that failed (ENOENT: no file and not `create`).
inline int Rewrite(const std::string& path, const char* line, bool create) {
  // O_NONBLOCK: a FIFO in the record's place fails the open instead of blocking it.
  const int flags = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT : 0);
  const int fd = open(path.c_str(), flags, 0600);
  if (fd < 0) {
    return errno;
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

}  // namespace pid_record_internal

// Writes `pid` (> 0) as `path`'s record, in place, creating the file if needed. Returns 0, or the
// errno of the step that failed.
inline int WritePidRecord(const std::string& path, pid_t pid) {
  char line[kPidRecordBytes + 1];
  std::snprintf(line, sizeof(line), "%-10d\n", static_cast<int>(pid));
  return pid_record_internal::Rewrite(path, line, /*create=*/true);
}

// Clears `path`'s record to a blank line, in place. A record that is not there needs no clearing;
// something that cannot be rewritten in its place (a FIFO, a directory) is removed instead.
// Returns 0, or the errno of that removal.
inline int ClearPidRecord(const std::string& path) {
  char line[kPidRecordBytes + 1];
  std::snprintf(line, sizeof(line), "%10s\n", "");
  const int err = pid_record_internal::Rewrite(path, line, /*create=*/false);
  if (err == 0 || err == ENOENT || unlink(path.c_str()) == 0 || errno == ENOENT) {
    return 0;
  }
  return errno;
}

// The pid `path`'s record names, or 0: none (blank, missing, unreadable or not a pid above 1).
// Only a hint: a reader checks the process itself before acting on it.
inline pid_t ReadPidRecord(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    return 0;
  }
  char text[32] = {};
  ssize_t n = -1;
  do {
    n = read(fd, text, sizeof(text) - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) {
    return 0;
  }
  char* end = nullptr;
  errno = 0;
  const long pid = std::strtol(text, &end, 10);
  while (end != nullptr && (*end == ' ' || *end == '\n')) {
    ++end;
  }
  if (errno != 0 || end == text || end == nullptr || *end != '\0' || pid <= 1 ||
      pid > std::numeric_limits<pid_t>::max()) {
    return 0;
  }
  return static_cast<pid_t>(pid);
}

}  // namespace ktesio::daemon::shim
