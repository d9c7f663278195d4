// Operator labels: one row per (instance, key); removed with the instance (ON DELETE CASCADE).

#include "ktesio/contract/status_macros.h"
#include "store/store.h"

namespace ktesio::daemon::store {

absl::Status Store::SetLabels(int64_t instance_id, const Labels& labels) {
  return InTransaction([&]() -> absl::Status {
    KT_ASSIGN_OR_RETURN(Statement clear, db_.Prepare("DELETE FROM labels WHERE instance_id = ?1"));
    clear.Bind(1, instance_id);
    KT_RETURN_IF_ERROR(clear.Run());
    for (const auto& [key, value] : labels) {
      KT_ASSIGN_OR_RETURN(
          Statement insert,
          db_.Prepare("INSERT INTO labels (instance_id, key, value) VALUES (?1, ?2, ?3)"));
      insert.Bind(1, instance_id).Bind(2, key).Bind(3, value);
      KT_RETURN_IF_ERROR(insert.Run());
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<Store::Labels> Store::GetLabels(int64_t instance_id) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT key, value FROM labels WHERE instance_id = ?1 ORDER BY key"));
  stmt.Bind(1, instance_id);
  Labels labels;
  absl::Status status =
      stmt.ForEach([&](const Statement& row) { labels[row.ColumnText(0)] = row.ColumnText(1); });
  if (!status.ok()) {
    return status;
  }
  return labels;
}

absl::StatusOr<std::map<int64_t, Store::Labels>> Store::AllLabels() {
  KT_ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("SELECT instance_id, key, value FROM labels"));
  std::map<int64_t, Labels> all;
  absl::Status status = stmt.ForEach(
      [&](const Statement& row) { all[row.ColumnInt(0)][row.ColumnText(1)] = row.ColumnText(2); });
  if (!status.ok()) {
    return status;
  }
  return all;
}

}  // namespace ktesio::daemon::store
