#pragma once

// Small filesystem effects with Status errors (reason IO_ERROR).

#include <sys/types.h>

#include <limits>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ktesio::daemon::fs {

// How hard WriteFileAtomic works: kDurable fsyncs the file and its directory (the data survives
// a power cut); kAtomicOnly still renames a complete temp file into place (readers never see a
// torn file) but skips the fsyncs — for files the engine rewrites at every start anyway.
enum class Durability { kDurable, kAtomicOnly };

// Writes `content` to a temp file beside `path` and renames it over `path`, so readers see the
// old or the new file, never a torn one. Errors: INTERNAL/IO_ERROR naming the path and errno.
absl::Status WriteFileAtomic(const std::string& path, std::string_view content, mode_t mode,
                             Durability durability = Durability::kDurable);

// Reads a whole file. Errors: NOT_FOUND/IO_ERROR when missing, INTERNAL/IO_ERROR otherwise.
absl::StatusOr<std::string> ReadFile(const std::string& path);
// Reads a whole regular file of at most `max_bytes`, for files whose path or content a client or
// an operator's hand edit decides: a FIFO, a device or a directory is refused without blocking
// (opened non-blocking, checked with fstat), and a longer file without reading past the limit.
// Errors: NOT_FOUND/IO_ERROR when missing; INVALID_ARGUMENT/IO_ERROR naming the path when it is
// not a regular file or is too large; INTERNAL/IO_ERROR otherwise.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, size_t max_bytes);
// The limit for configuration files an operator or an agent can edit (an instance's config.toml,
// the files config delivery renders into a home): far above any real one.
inline constexpr size_t kMaxConfigFileBytes = 16 << 20;
// Reads what is left of the open descriptor `fd` and closes it, whatever happens; `path` names
// it in errors. Errors: INVALID_ARGUMENT/IO_ERROR past `max_bytes`, INTERNAL/IO_ERROR.
absl::StatusOr<std::string> ReadAndClose(int fd, const std::string& path,
                                         size_t max_bytes = std::numeric_limits<size_t>::max());

// Creates `path` (and missing parents) with `mode` on the leaf; an existing directory is
// accepted and its mode left alone unless `enforce_mode`. Errors: INTERNAL/IO_ERROR.
absl::Status MakeDirs(const std::string& path, mode_t mode, bool enforce_mode = false);

// Removes a directory tree. Errors: INTERNAL/IO_ERROR.
absl::Status RemoveTree(const std::string& path);

bool Exists(const std::string& path);

// Checks that `relative` (already lexically confined) stays inside `root` after resolving any
// symlinks among its existing components. Errors: INVALID_ARGUMENT/CONFIG_INVALID naming the
// path when a symlink escapes the root.
absl::Status CheckConfined(const std::string& root, const std::string& relative);

}  // namespace ktesio::daemon::fs
