#include "store/maintenance.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "store/sqlite.h"
#include "store/store.h"

namespace ktesio::daemon::store {
namespace {

absl::Status StoreError(absl::StatusCode code, std::string message) {
  return contract::MakeError(code, contract::reason::kStoreError, message);
}

// Steps `sql` to the end, calling `row(stmt)` per row.
template <typename Fn>
absl::Status ForEachRow(Database& db, const std::string& sql, Fn row) {
  KT_ASSIGN_OR_RETURN(Statement stmt, db.Prepare(sql));
  return stmt.ForEach(row);
}

}  // namespace

absl::Status WriteConsistentCopy(const std::string& db_path, const std::string& dest) {
  if (access(dest.c_str(), F_OK) == 0) {
    return StoreError(absl::StatusCode::kAlreadyExists, absl::StrCat(dest, " already exists"));
  }
  KT_ASSIGN_OR_RETURN(Database db, Database::OpenReadOnly(db_path));
  KT_ASSIGN_OR_RETURN(Statement stmt, db.Prepare("VACUUM INTO ?1"));
  stmt.Bind(1, dest);
  if (absl::Status status = stmt.Run(); !status.ok()) {
    unlink(dest.c_str());
    return StoreError(status.code(),
                      absl::StrCat("copying ", db_path, " failed: ", status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<StoreInspection> InspectStore(const std::string& path) {
  KT_ASSIGN_OR_RETURN(Database db, Database::OpenReadOnly(path));
  StoreInspection inspection;
  if (absl::Status status = ForEachRow(db, "PRAGMA user_version",
                                       [&](const Statement& s) {
                                         inspection.schema_version =
                                             static_cast<int>(s.ColumnInt(0));
                                       });
      !status.ok()) {
    return StoreError(absl::StatusCode::kDataLoss,
                      absl::StrCat(path, ": not a readable store: ", status.message()));
  }
  if (absl::Status status =
          ForEachRow(db, "PRAGMA integrity_check(20)",
                     [&](const Statement& s) { inspection.integrity.push_back(s.ColumnText(0)); });
      !status.ok()) {
    inspection.integrity = {absl::StrCat("integrity check failed: ", status.message())};
    return inspection;
  }
  if (!inspection.ok() || inspection.schema_version < 1 ||
      inspection.schema_version > kSchemaVersion) {
    return inspection;
  }
  absl::Status status = ForEachRow(
      db, "SELECT name, state, home FROM instances ORDER BY name", [&](const Statement& s) {
        inspection.instances.push_back({s.ColumnText(0), s.ColumnText(1), s.ColumnText(2)});
      });
  if (status.ok()) {
    // From schema 10 one row can hold a span of events.
    status =
        ForEachRow(db,
                   inspection.schema_version >= 10 ? "SELECT COALESCE(SUM(span), 0) FROM events"
                                                   : "SELECT count(*) FROM events",
                   [&](const Statement& s) { inspection.events = s.ColumnInt(0); });
  }
  if (status.ok() && inspection.schema_version >= 3) {
    status = ForEachRow(db, "SELECT count(*) FROM usage_events",
                        [&](const Statement& s) { inspection.ledger_rows = s.ColumnInt(0); });
  }
  if (!status.ok()) {
    return StoreError(absl::StatusCode::kDataLoss,
                      absl::StrCat(path, ": reading it failed: ", status.message()));
  }
  return inspection;
}

}  // namespace ktesio::daemon::store
