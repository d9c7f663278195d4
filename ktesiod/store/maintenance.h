#pragma once

// Store maintenance that never goes through the daemon's own connection: a consistent copy of a
// live store (for `ktctl daemon backup`), and a read-only inspection (for `ktesiod --check` and
// `ktesiod --restore`). Both open their own connection: SQLite's WAL mode gives it a consistent
// snapshot while the daemon keeps writing.
//
// Thread-safety: each call is self-contained; callable from any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ktesio::daemon::store {

// Writes a consistent, compacted copy of the database at `db_path` to `dest` (which must not
// exist) with VACUUM INTO, through a read-only connection. Errors: STORE_ERROR (a damaged store,
// no space, `dest` exists).
absl::Status WriteConsistentCopy(const std::string& db_path, const std::string& dest);

struct StoreInspection {
  int schema_version = 0;
  std::vector<std::string> integrity;  // "ok", or what PRAGMA integrity_check found (≤ 20 lines)
  struct Instance {
    std::string name;
    std::string state;
    std::string home;
  };
  std::vector<Instance> instances;
  int64_t events = 0;
  int64_t ledger_rows = 0;
  bool ok() const { return integrity.size() == 1 && integrity[0] == "ok"; }
};

// Reads `path` without writing anything: schema version, integrity, instances and row counts.
// A store from a newer daemon is inspected for integrity only (instances unread). Errors:
// NOT_FOUND/STORE_ERROR (no file), STORE_ERROR (not a database at all).
absl::StatusOr<StoreInspection> InspectStore(const std::string& path);

}  // namespace ktesio::daemon::store
