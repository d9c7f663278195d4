// Retention: pruning old events, audit records and per-call ledger detail in small batches.
// Per-run totals (usage_totals), runs, breaches and instances are never pruned, so usage
// views, budgets and dollars do not change when detail goes (docs/operations.md "Retention").

#include <limits>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "store/store.h"

namespace ktesio::daemon::store {

absl::StatusOr<int64_t> Store::PruneEvents(EventLog log, int64_t before_ms, int64_t keep_max,
                                           int64_t limit) {
  if (keep_max <= 0) {
    keep_max = std::numeric_limits<int64_t>::max() / 2;
  }
  // Never the newest row: its cursor is what a resuming subscriber compares with.
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          log == EventLog::kEvents
              ? "DELETE FROM events WHERE cursor IN (SELECT cursor FROM events WHERE cursor < "
                "(SELECT MAX(cursor) FROM events) AND (at_ms < ?1 OR cursor <= (SELECT MAX(cursor) "
                "FROM events) - ?2) ORDER BY cursor LIMIT ?3) RETURNING span, type"
              : "DELETE FROM audit_log WHERE cursor IN (SELECT cursor FROM audit_log WHERE cursor "
                "< "
                "(SELECT MAX(cursor) FROM audit_log) AND (at_ms < ?1 OR cursor <= (SELECT "
                "MAX(cursor) FROM audit_log) - ?2) ORDER BY cursor LIMIT ?3) RETURNING 1, ''"));
  stmt.Bind(1, before_ms).Bind(2, keep_max).Bind(3, limit);
  int64_t events = 0;
  std::map<std::string, int64_t> by_type;
  KT_RETURN_IF_ERROR(stmt.ForEach([&](const Statement& row) {
    events += row.ColumnInt(0);
    by_type[row.ColumnText(1)] += row.ColumnInt(0);
  }));
  if (log == EventLog::kAudit) {
    return events;
  }
  KT_ASSIGN_OR_RETURN(const int64_t trimmed, TrimOldestSpan(keep_max, &by_type));
  events += trimmed;
  // What goes from the log stays counted (in the caller's transaction, with the delete).
  KT_ASSIGN_OR_RETURN(
      Statement count,
      db_.Prepare("INSERT INTO events_pruned (type, count) VALUES (?1, ?2) "
                  "ON CONFLICT (type) DO UPDATE SET count = count + excluded.count"));
  for (const auto& [type, n] : by_type) {
    count.Reset();
    count.Bind(1, std::string_view(type)).Bind(2, n);
    KT_RETURN_IF_ERROR(count.Run());
  }
  return events;
}

absl::StatusOr<int64_t> Store::TrimOldestSpan(int64_t keep_max,
                                              std::map<std::string, int64_t>* by_type) {
  // A usage span kept whole by the row-wise delete may still start more than keep_max events
  // behind the newest: its oldest documents go, so the count limit holds exactly.
  KT_ASSIGN_OR_RETURN(
      Statement oldest,
      db_.Prepare("SELECT cursor, span, payload, (SELECT MAX(cursor) FROM events), type FROM "
                  "events ORDER BY cursor LIMIT 1"));
  KT_ASSIGN_OR_RETURN(const bool row, oldest.Step());
  if (!row) {
    return 0;
  }
  const int64_t cursor = oldest.ColumnInt(0);
  const int64_t span = oldest.ColumnInt(1);
  const int64_t threshold = oldest.ColumnInt(3) - keep_max;  // cursors <= this are over the limit
  const int64_t drop = threshold - (cursor - span + 1) + 1;
  if (span == 1 || cursor <= threshold || drop <= 0) {
    return 0;
  }
  const std::string payloads = oldest.ColumnText(2);
  size_t at = 0;
  for (int64_t i = 0; i < drop; ++i) {
    at = payloads.find('\n', at);
    if (at == std::string::npos) {
      return contract::MakeError(absl::StatusCode::kDataLoss, contract::reason::kStoreError,
                                 absl::StrCat("event row ", cursor,
                                              " holds fewer documents than "
                                              "its span of ",
                                              span));
    }
    ++at;
  }
  KT_ASSIGN_OR_RETURN(Statement trim,
                      db_.Prepare("UPDATE events SET span = ?2, payload = ?3 WHERE cursor = ?1"));
  trim.Bind(1, cursor).Bind(2, span - drop).Bind(3, std::string_view(payloads).substr(at));
  KT_RETURN_IF_ERROR(trim.Run());
  (*by_type)[oldest.ColumnText(4)] += drop;
  return drop;
}

absl::StatusOr<int64_t> Store::PruneLedger(int64_t ended_before_ms, int64_t limit) {
  int64_t deleted = 0;
  for (const char* sql :
       {"DELETE FROM usage_events WHERE (instance_id, run, sequence) IN (SELECT u.instance_id, "
        "u.run, u.sequence FROM usage_events u JOIN runs r ON r.instance_id = u.instance_id AND "
        "r.run = u.run WHERE r.ended_at_ms IS NOT NULL AND r.ended_at_ms < ?1 LIMIT ?2)",
        "DELETE FROM unknown_usage WHERE rowid IN (SELECT u.rowid FROM unknown_usage u JOIN runs "
        "r ON r.instance_id = u.instance_id AND r.run = u.run WHERE r.ended_at_ms IS NOT NULL "
        "AND r.ended_at_ms < ?1 LIMIT ?2)"}) {
    KT_ASSIGN_OR_RETURN(Statement stmt, db_.Prepare(sql));
    stmt.Bind(1, ended_before_ms).Bind(2, limit - deleted);
    KT_RETURN_IF_ERROR(stmt.Run());
    deleted += db_.Changes();
    if (deleted >= limit) {
      break;
    }
  }
  return deleted;
}

absl::StatusOr<std::vector<Store::EndedRun>> Store::RunsEndedBetween(int64_t from_ms,
                                                                     int64_t to_ms) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT i.home, r.run FROM runs r JOIN instances i ON i.id = r.instance_id WHERE "
                  "r.ended_at_ms IS NOT NULL AND r.ended_at_ms >= ?1 AND r.ended_at_ms < ?2"));
  stmt.Bind(1, from_ms).Bind(2, to_ms);
  std::vector<EndedRun> runs;
  absl::Status status = stmt.ForEach([&](const Statement& row) {
    runs.push_back({row.ColumnText(0), row.ColumnInt(1)});
  });
  if (!status.ok()) {
    return status;
  }
  return runs;
}

}  // namespace ktesio::daemon::store
