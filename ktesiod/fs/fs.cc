#include "fs/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::fs {
namespace {

namespace reason = contract::reason;

absl::Status IoError(std::string_view what, const std::string& path, int err) {
  return contract::MakeError(
      err == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kInternal, reason::kIoError,
      absl::StrCat(std::string(what), " ", path, ": ", std::strerror(err)));
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    return ".";
  }
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

absl::Status WriteFileAtomic(const std::string& path, std::string_view content, mode_t mode,
                             Durability durability) {
  const bool durable = durability == Durability::kDurable;
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) {
    return IoError("cannot create", tmp, errno);
  }
  fchmod(fd, mode);
  size_t written = 0;
  while (written < content.size()) {
    ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return IoError("cannot write", tmp, err);
    }
    written += static_cast<size_t>(n);
  }
  if (durable && fsync(fd) != 0) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return IoError("cannot fsync", tmp, err);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return IoError("cannot rename onto", path, err);
  }
  int dir = durable ? open(DirName(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (dir >= 0) {
    fsync(dir);
    close(dir);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return IoError("cannot open", path, errno);
  }
  return ReadAndClose(fd, path);
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    return IoError("cannot open", path, errno);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return IoError("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return contract::MakeError(absl::StatusCode::kInvalidArgument, contract::reason::kIoError,
                               absl::StrCat(path, " is not a regular file"));
  }
  return ReadAndClose(fd, path, max_bytes);
}

absl::StatusOr<std::string> ReadAndClose(int fd, const std::string& path, size_t max_bytes) {
  std::string content;
  char buffer[65536];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      int err = errno;
      close(fd);
      return IoError("cannot read", path, err);
    }
    if (n == 0) {
      break;
    }
    if (content.size() + static_cast<size_t>(n) > max_bytes) {
      close(fd);
      return contract::MakeError(absl::StatusCode::kInvalidArgument, contract::reason::kIoError,
                                 absl::StrCat(path, " is larger than ", max_bytes, " bytes"));
    }
    content.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return content;
}

absl::Status MakeDirs(const std::string& path, mode_t mode, bool enforce_mode) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return contract::MakeError(absl::StatusCode::kInternal, reason::kIoError,
                                 absl::StrCat(path, " exists and is not a directory"));
    }
    if (enforce_mode && (st.st_mode & 07777) != mode && chmod(path.c_str(), mode) != 0) {
      return IoError("cannot chmod", path, errno);
    }
    return absl::OkStatus();
  }
  std::string parent = DirName(path);
  if (parent != path && parent != "/" && parent != ".") {
    KT_RETURN_IF_ERROR(MakeDirs(parent, 0755));
  }
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return IoError("cannot create directory", path, errno);
  }
  chmod(path.c_str(), mode);
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) {
    return contract::MakeError(absl::StatusCode::kInternal, reason::kIoError,
                               absl::StrCat("cannot remove ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

absl::Status CheckConfined(const std::string& root, const std::string& relative) {
  std::error_code ec;
  std::filesystem::path real_root = std::filesystem::weakly_canonical(root, ec);
  if (ec) {
    return contract::MakeError(absl::StatusCode::kInternal, reason::kIoError,
                               absl::StrCat("cannot resolve ", root, ": ", ec.message()));
  }
  std::filesystem::path resolved =
      std::filesystem::weakly_canonical(std::filesystem::path(root) / relative, ec);
  if (ec) {
    return contract::MakeError(absl::StatusCode::kInternal, reason::kIoError,
                               absl::StrCat("cannot resolve ", relative, ": ", ec.message()));
  }
  std::string root_text = real_root.string();
  std::string text = resolved.string();
  if (text.size() <= root_text.size() || text.compare(0, root_text.size(), root_text) != 0 ||
      text[root_text.size()] != '/') {
    return contract::MakeError(
        absl::StatusCode::kInvalidArgument, reason::kConfigInvalid,
        absl::StrCat("file target '", relative, "' escapes the Agent Home through a symlink"));
  }
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::fs
