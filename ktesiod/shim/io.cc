#include "io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

namespace ktesio::daemon::shim {
namespace {

constexpr int kFirstBackoffMs = 5;
constexpr int kMaxBackoffMs = 250;

// Closes `fd` on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) {
      close(fd_);
    }
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

bool WriteFully(int fd, std::string_view data, std::string_view what, const GiveUpAt& give_up_at) {
  int backoff_ms = kFirstBackoffMs;
  int last_error = 0;
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      backoff_ms = kFirstBackoffMs;
      continue;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno != last_error) {  // Once per episode, not once per retry.
      last_error = errno;
      Report(ErrnoMessage(std::string(what) + ": write failed, retrying", errno));
    }
    if (Clock::now() >= give_up_at()) {
      Report(std::string(what) + ": giving up, " + std::to_string(data.size()) +
             " bytes not written");
      return false;
    }
    SleepMs(backoff_ms);
    backoff_ms = std::min(backoff_ms * 2, kMaxBackoffMs);
  }
  if (last_error != 0) {
    Report(std::string(what) + ": write recovered");
  }
  return true;
}

bool WriteOnce(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool WriteFileAtomic(const std::string& dir, const std::string& name, std::string_view content,
                     bool durable, std::string* error) {
  std::string path = dir + "/" + name;
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = ErrnoMessage("open " + tmp, errno);
    return false;
  }
  {
    FdCloser closer(fd);
    if (!WriteOnce(fd, content)) {
      *error = ErrnoMessage("write " + tmp, errno);
      return false;
    }
    if (durable && fsync(fd) != 0) {
      *error = ErrnoMessage("fsync " + tmp, errno);
      return false;
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    *error = ErrnoMessage("rename " + tmp, errno);
    unlink(tmp.c_str());
    return false;
  }
  if (durable) {
    int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      fsync(dir_fd);  // Best effort: the rename itself already happened.
      close(dir_fd);
    }
  }
  return true;
}

void SleepMs(int ms) {
  timespec ts{ms / 1000, static_cast<long>(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void Report(std::string_view message) {
  std::string line = "ktesio-shim: ";
  line.append(message);
  line.push_back('\n');
  WriteOnce(STDERR_FILENO, line);
}

std::string ErrnoMessage(std::string_view what, int err) {
  std::string text(what);
  text += ": ";
  text += std::strerror(err);
  return text;
}

}  // namespace ktesio::daemon::shim
