#pragma once

// The secrets store, <state>/secrets.toml: the only file that holds cleartext, by design (config
// files, the SQLite store and snapshots hold `secret:NAME` references only). The file is written
// atomically with mode 0600 and is refused when its mode gives group or others any access.
//
// On disk: one key per secret, `NAME = "value"` (quoted when NAME holds a '.'); a value that is
// not valid UTF-8 is stored as a table `[NAME]\nbase64 = "..."` (an inline table
// `NAME = { base64 = "..." }` is read too), so any bytes except NUL round-trip.
//
// Thread-safe: every operation is serialized process-wide (read-modify-write never loses an
// update). Other processes must not write the file.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ktesio/contract/limits.h"

namespace ktesio::daemon::config {

// Looks a variable up in the daemon's own environment (injectable for tests).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The real process environment (getenv).
EnvLookup ProcessEnvironment();

inline constexpr std::string_view kSecretsFileName = "secrets.toml";
inline constexpr std::size_t kMaxSecretBytes = contract::kMaxSecretBytes;

class SecretsStore {
 public:
  // `state_dir` must exist; the file is created on the first Set.
  explicit SecretsStore(std::string state_dir);

  const std::string& path() const { return path_; }

  // Stores `value` under `name`; returns true when it replaced an existing value.
  // Errors: INVALID_ARGUMENT/CONFIG_INVALID for a bad name (IsValidSecretName) or value (empty,
  // a NUL byte, more than 64 KiB); those of the read below; INTERNAL/IO_ERROR on write failure.
  absl::StatusOr<bool> Set(std::string_view name, std::string_view value);

  // Names only, sorted. Errors: those of the read below.
  absl::StatusOr<std::vector<std::string>> List() const;

  // Errors: NOT_FOUND/NOT_FOUND when there is no such secret; then as Set.
  absl::Status Remove(std::string_view name);

  // Resolves `name`: the store first, then the daemon environment variable of the same name.
  // An empty value never resolves a reference (it would be delivered silently empty).
  // Errors: FAILED_PRECONDITION/DELIVERY_FAILED naming NAME and both resolvers tried;
  // INVALID_ARGUMENT/CONFIG_INVALID for a bad name; those of the read below (a refused store is
  // not skipped: the environment is not consulted then).
  absl::StatusOr<std::string> Resolve(std::string_view name, const EnvLookup& environment) const;

  // Read errors, common to every operation:
  //   PERMISSION_DENIED/PERMISSION_DENIED when the file is a symlink, not a regular file, or its
  //     mode gives group or others any permission (the message names the mode and the fix);
  //   INVALID_ARGUMENT/CONFIG_INVALID when it is not a valid secrets document (file:line:col);
  //   INTERNAL/IO_ERROR when it cannot be read. A missing file is an empty store.

 private:
  std::string path_;
};

}  // namespace ktesio::daemon::config
