// The store's telemetry reads: aggregate counts for the metrics endpoint.

#include "store/store.h"

namespace ktesio::daemon::store {

absl::StatusOr<Store::EventCounts> Store::CountEvents(int64_t after) {
  absl::StatusOr<Statement> stmt =
      db_.Prepare("SELECT type, count(*), max(cursor) FROM events WHERE cursor > ?1 GROUP BY type");
  if (!stmt.ok()) {
    return stmt.status();
  }
  stmt->Bind(1, after);
  EventCounts counts;
  counts.last_cursor = after;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) {
      return row.status();
    }
    if (!*row) {
      return counts;
    }
    counts.by_type[stmt->ColumnText(0)] += static_cast<uint64_t>(stmt->ColumnInt(1));
    counts.last_cursor = std::max(counts.last_cursor, stmt->ColumnInt(2));
  }
}

absl::StatusOr<std::vector<Store::BreachCount>> Store::CountBreaches() {
  absl::StatusOr<Statement> stmt = db_.Prepare(
      "SELECT i.name, b.action, count(*) FROM breaches b JOIN instances i ON i.id = b.instance_id "
      "GROUP BY i.name, b.action ORDER BY i.name, b.action");
  if (!stmt.ok()) {
    return stmt.status();
  }
  std::vector<BreachCount> counts;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) {
      return row.status();
    }
    if (!*row) {
      return counts;
    }
    counts.push_back(
        {stmt->ColumnText(0), stmt->ColumnText(1), static_cast<uint64_t>(stmt->ColumnInt(2))});
  }
}

}  // namespace ktesio::daemon::store
