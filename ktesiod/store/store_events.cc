// The event log and the audit log: appending, reading from a cursor, and the usage_update spans
// of a ledger transaction (migration 10): one row holds `span` consecutive events, its cursor
// the last of theirs and its payload their documents joined by '\n' (a JSON document written by
// contract::JsonWriter never holds a raw newline). Readers see one EventRow per event, exactly
// as if each had its own row.

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "store/store.h"

namespace ktesio::daemon::store {
namespace {

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n', start)) {
    parts.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  parts.push_back(text.substr(start));
  return parts;
}

}  // namespace

absl::StatusOr<int64_t> Store::AppendEvent(const EventRow& event, EventLog log) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          log == EventLog::kEvents
              ? "INSERT INTO events (at_ms, instance, type, payload) VALUES (?1, ?2, ?3, ?4)"
              : "INSERT INTO audit_log (at_ms, instance, type, payload) VALUES (?1, ?2, ?3, ?4)"));
  stmt.Bind(1, event.at_ms).Bind(2, event.instance).Bind(3, event.type);
  stmt.Bind(4, event.payload_json);
  KT_RETURN_IF_ERROR(stmt.Run());
  return db_.LastInsertRowId();
}

absl::StatusOr<int64_t> Store::AppendEventSpan(int64_t at_ms, const std::string& instance,
                                               const std::string& type, const std::string& payloads,
                                               int64_t span) {
  if (span < 1) {
    return contract::MakeError(absl::StatusCode::kInternal, contract::reason::kStoreError,
                               "an event span holds at least one event");
  }
  // The cursors AUTOINCREMENT would hand out next: after the highest ever used, even if pruned.
  KT_ASSIGN_OR_RETURN(
      Statement last,
      db_.Prepare("SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), "
                  "0), COALESCE((SELECT MAX(cursor) FROM events), 0))"));
  KT_RETURN_IF_ERROR(last.Step().status());
  const int64_t cursor = last.ColumnInt(0) + span;
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("INSERT INTO events (cursor, at_ms, instance, type, payload, span) VALUES "
                  "(?1, ?2, ?3, ?4, ?5, ?6)"));
  stmt.Bind(1, cursor).Bind(2, at_ms).Bind(3, instance).Bind(4, type).Bind(5, payloads);
  stmt.Bind(6, span);
  KT_RETURN_IF_ERROR(stmt.Run());
  return cursor;
}

absl::StatusOr<int64_t> Store::LastCursor(EventLog log) {
  return QueryInt(log == EventLog::kEvents ? "SELECT COALESCE(MAX(cursor), 0) FROM events"
                                           : "SELECT COALESCE(MAX(cursor), 0) FROM audit_log");
}

absl::StatusOr<int64_t> Store::FirstCursor(EventLog log) {
  return QueryInt(log == EventLog::kEvents
                      ? "SELECT COALESCE((SELECT cursor - span + 1 FROM events ORDER BY cursor "
                        "LIMIT 1), 0)"
                      : "SELECT COALESCE(MIN(cursor), 0) FROM audit_log");
}

absl::StatusOr<std::vector<EventRow>> Store::ReadEvents(int64_t after, const std::string& instance,
                                                        int64_t limit, EventLog log) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          log == EventLog::kEvents
              ? "SELECT cursor, at_ms, instance, type, payload, span FROM events "
                "WHERE cursor > ?1 AND (?2 = '' OR instance = ?2) ORDER BY cursor LIMIT ?3"
              : "SELECT cursor, at_ms, instance, type, payload, 1 FROM audit_log "
                "WHERE cursor > ?1 AND (?2 = '' OR instance = ?2) ORDER BY cursor LIMIT ?3"));
  stmt.Bind(1, after).Bind(2, instance).Bind(3, limit);
  std::vector<EventRow> events;
  while (static_cast<int64_t>(events.size()) < limit) {
    KT_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      break;
    }
    const int64_t cursor = stmt.ColumnInt(0);
    const int64_t span = stmt.ColumnInt(5);
    if (span == 1) {
      events.push_back(EventRow{cursor, stmt.ColumnInt(1), stmt.ColumnText(2), stmt.ColumnText(3),
                                stmt.ColumnText(4)});
      continue;
    }
    const std::string payloads = stmt.ColumnText(4);
    const std::vector<std::string_view> parts = SplitLines(payloads);
    if (static_cast<int64_t>(parts.size()) != span) {
      return contract::MakeError(absl::StatusCode::kDataLoss, contract::reason::kStoreError,
                                 absl::StrCat("event row ", cursor, " holds ", parts.size(),
                                              " documents for a span of ", span));
    }
    for (int64_t i = 0; i < span && static_cast<int64_t>(events.size()) < limit; ++i) {
      const int64_t at = cursor - span + 1 + i;
      if (at > after) {
        events.push_back(EventRow{at, stmt.ColumnInt(1), stmt.ColumnText(2), stmt.ColumnText(3),
                                  std::string(parts[static_cast<size_t>(i)])});
      }
    }
  }
  return events;
}

}  // namespace ktesio::daemon::store
