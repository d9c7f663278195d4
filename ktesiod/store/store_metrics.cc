// The store's telemetry reads: aggregate counts for the metrics endpoint.

#include "ktesio/contract/status_macros.h"
#include "store/store.h"

namespace ktesio::daemon::store {

absl::StatusOr<Store::EventCounts> Store::CountEvents(int64_t after, bool with_pruned) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          "SELECT type, sum(span), max(cursor) FROM events WHERE cursor > ?1 GROUP BY type"));
  stmt.Bind(1, after);
  EventCounts counts;
  counts.last_cursor = after;
  absl::Status status = stmt.ForEach([&](const Statement& row) {
    counts.by_type[row.ColumnText(0)] += static_cast<uint64_t>(row.ColumnInt(1));
    counts.last_cursor = std::max(counts.last_cursor, row.ColumnInt(2));
  });
  if (!status.ok()) {
    return status;
  }
  if (with_pruned) {  // counting from the start: what retention pruned counts too
    KT_ASSIGN_OR_RETURN(Statement pruned, db_.Prepare("SELECT type, count FROM events_pruned"));
    KT_RETURN_IF_ERROR(pruned.ForEach([&](const Statement& row) {
      counts.by_type[row.ColumnText(0)] += static_cast<uint64_t>(row.ColumnInt(1));
    }));
  }
  return counts;
}

absl::StatusOr<std::vector<Store::BreachCount>> Store::CountBreaches() {
  KT_ASSIGN_OR_RETURN(Statement stmt,
                      db_.Prepare("SELECT i.name, b.action, count(*) FROM breaches b JOIN "
                                  "instances i ON i.id = b.instance_id "
                                  "GROUP BY i.name, b.action ORDER BY i.name, b.action"));
  std::vector<BreachCount> counts;
  while (true) {
    KT_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return counts;
    }
    counts.push_back(
        {stmt.ColumnText(0), stmt.ColumnText(1), static_cast<uint64_t>(stmt.ColumnInt(2))});
  }
}

absl::StatusOr<bool> Store::RunBreachedToBlock(int64_t instance_id, int64_t run) {
  KT_ASSIGN_OR_RETURN(Statement stmt,
                      db_.Prepare("SELECT 1 FROM breaches WHERE instance_id = ?1 AND run = ?2 AND "
                                  "action IN ('pause', 'stop') LIMIT 1"));
  stmt.Bind(1, instance_id).Bind(2, run);
  return stmt.Step();
}

absl::StatusOr<std::vector<Store::PendingBreach>> Store::PendingBreaches() {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          "SELECT instance_id, run, scope, dimension, limit_value, observed, action FROM breaches "
          "WHERE pending = 1 ORDER BY id"));
  std::vector<PendingBreach> pending;
  absl::Status status = stmt.ForEach([&](const Statement& row) {
    pending.push_back({row.ColumnInt(0), row.ColumnInt(1), row.ColumnText(2), row.ColumnText(3),
                       row.ColumnInt(4), row.ColumnInt(5), row.ColumnText(6)});
  });
  if (!status.ok()) {
    return status;
  }
  return pending;
}

absl::Status Store::ClearPendingBreaches(int64_t instance_id, int64_t run) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          "UPDATE breaches SET pending = 0 WHERE instance_id = ?1 AND run = ?2 AND pending = 1"));
  stmt.Bind(1, instance_id).Bind(2, run);
  return stmt.Run();
}

}  // namespace ktesio::daemon::store
