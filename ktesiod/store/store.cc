#include "store/store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::store {
namespace {

namespace reason = contract::reason;

// Migration N takes the schema from version N-1 to N. Never edit a shipped entry; append.
constexpr const char* kMigrations[] = {
    // 1: instances and the event log.
    R"sql(
CREATE TABLE instances (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  snapshot BLOB NOT NULL,
  state TEXT NOT NULL,
  cause TEXT NOT NULL DEFAULT '',
  state_since_ms INTEGER NOT NULL,
  restart_count INTEGER NOT NULL DEFAULT 0,
  registered_at_ms INTEGER NOT NULL,
  home TEXT NOT NULL,
  pid INTEGER,
  pid_start_time INTEGER,
  started_at_ms INTEGER,
  current_run INTEGER NOT NULL DEFAULT 0,
  memory_kind TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE TABLE events (
  cursor INTEGER PRIMARY KEY AUTOINCREMENT,
  at_ms INTEGER NOT NULL,
  instance TEXT NOT NULL,
  type TEXT NOT NULL,
  payload TEXT NOT NULL
) STRICT;
CREATE INDEX events_by_instance ON events(instance, cursor);
)sql",
    // 2: the write-ahead spawn record, restart bookkeeping, and runs.
    R"sql(
ALTER TABLE instances ADD COLUMN shim_pid INTEGER;
ALTER TABLE instances ADD COLUMN shim_start_time INTEGER;
ALTER TABLE instances ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN crash_streak INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN last_exit TEXT NOT NULL DEFAULT '';
CREATE TABLE runs (
  instance_id INTEGER NOT NULL REFERENCES instances(id) ON DELETE CASCADE,
  run INTEGER NOT NULL,
  started_at_ms INTEGER NOT NULL,
  ended_at_ms INTEGER,
  end_cause TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (instance_id, run)
) STRICT;
)sql",
    // 3: the self-reported usage ledger and the per-run ingestion cursor.
    R"sql(
CREATE TABLE usage_events (
  id INTEGER PRIMARY KEY,
  instance_id INTEGER NOT NULL REFERENCES instances(id) ON DELETE CASCADE,
  run INTEGER NOT NULL,
  sequence INTEGER NOT NULL,
  input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  source TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  UNIQUE (instance_id, run, sequence)
) STRICT;
ALTER TABLE runs ADD COLUMN usage_offset INTEGER NOT NULL DEFAULT 0;
)sql",
    // 4: cost at the Rate in force when recorded, and the breaches log.
    R"sql(
ALTER TABLE usage_events ADD COLUMN cost_micros INTEGER;
CREATE TABLE breaches (
  id INTEGER PRIMARY KEY,
  instance_id INTEGER NOT NULL REFERENCES instances(id) ON DELETE CASCADE,
  run INTEGER NOT NULL,
  scope TEXT NOT NULL,
  dimension TEXT NOT NULL,
  limit_value INTEGER NOT NULL,
  observed INTEGER NOT NULL,
  action TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  UNIQUE (instance_id, run, scope, dimension)
) STRICT;
)sql",
    // 5: the engine-observed metering proxy: its port, and calls whose usage was absent.
    R"sql(
ALTER TABLE instances ADD COLUMN proxy_port INTEGER NOT NULL DEFAULT 0;
CREATE TABLE unknown_usage (
  id INTEGER PRIMARY KEY,
  instance_id INTEGER NOT NULL REFERENCES instances(id) ON DELETE CASCADE,
  run INTEGER NOT NULL,
  sequence INTEGER NOT NULL,
  source TEXT NOT NULL,
  api TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  UNIQUE (instance_id, run, sequence)
) STRICT;
)sql",
    // 6: per-run usage totals maintained with every ledger write, so reading an instance's
    // usage costs one row per run instead of a scan of its whole ledger.
    R"sql(
CREATE TABLE usage_totals (
  instance_id INTEGER NOT NULL REFERENCES instances(id) ON DELETE CASCADE,
  run INTEGER NOT NULL,
  input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  cost_micros INTEGER NOT NULL DEFAULT 0,
  priced_events INTEGER NOT NULL DEFAULT 0,
  unpriced_events INTEGER NOT NULL DEFAULT 0,
  unknown_calls INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (instance_id, run)
) STRICT;
INSERT INTO usage_totals (instance_id, run, input_tokens, output_tokens, cost_micros,
                          priced_events, unpriced_events)
  SELECT instance_id, run, SUM(input_tokens), SUM(output_tokens), COALESCE(SUM(cost_micros), 0),
         COUNT(cost_micros), COUNT(*) - COUNT(cost_micros)
  FROM usage_events GROUP BY instance_id, run;
INSERT INTO usage_totals (instance_id, run, unknown_calls)
  SELECT instance_id, run, COUNT(*) FROM unknown_usage GROUP BY instance_id, run
  ON CONFLICT (instance_id, run) DO UPDATE SET unknown_calls = excluded.unknown_calls;
)sql",
    // 7: the audit trail (one row per mutating API call), a log of its own with its own cursor.
    R"sql(
CREATE TABLE audit_log (
  cursor INTEGER PRIMARY KEY AUTOINCREMENT,
  at_ms INTEGER NOT NULL,
  instance TEXT NOT NULL,
  type TEXT NOT NULL,
  payload TEXT NOT NULL
) STRICT;
CREATE INDEX audit_log_by_instance ON audit_log(instance, cursor);
)sql",
    // 8: a breach's pause/stop action is pending until the instance has left running for that
    // run, recorded in the breach's own transaction so a crash between the two cannot lose it.
    R"sql(
ALTER TABLE breaches ADD COLUMN pending INTEGER NOT NULL DEFAULT 0;
)sql",
    // 9: operator labels (Kubernetes syntax), one row per instance and key; the fleet file's
    // ownership is the label ktesio.io/fleet.
    R"sql(
CREATE TABLE labels (
  instance_id INTEGER NOT NULL REFERENCES instances(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (instance_id, key)
) STRICT, WITHOUT ROWID;
)sql",
    // 10: self-reported ingestion writes one row per event instead of four. The usage_update
    // events of one ledger transaction share events rows (up to LedgerWriter::kMaxSpan each):
    // `span` is how many cursors a row holds, its cursor the last of them, its payload their
    // documents joined by newlines (Store::ReadEvents expands it). The ledger is keyed by its
    // natural key alone.
    R"sql(
ALTER TABLE events ADD COLUMN span INTEGER NOT NULL DEFAULT 1 CHECK (span >= 1);
CREATE TABLE usage_ledger (
  instance_id INTEGER NOT NULL REFERENCES instances(id) ON DELETE CASCADE,
  run INTEGER NOT NULL,
  sequence INTEGER NOT NULL,
  input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  source TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  cost_micros INTEGER,
  PRIMARY KEY (instance_id, run, sequence)
) STRICT, WITHOUT ROWID;
INSERT INTO usage_ledger (instance_id, run, sequence, input_tokens, output_tokens, source, at_ms,
                          cost_micros)
  SELECT instance_id, run, sequence, input_tokens, output_tokens, source, at_ms, cost_micros
  FROM usage_events;
DROP TABLE usage_events;
ALTER TABLE usage_ledger RENAME TO usage_events;
)sql",
    // 11: automatic restarts over the instance's whole life (the ktesio_agent_restarts_total
    // counter), which an operator start does not reset as it resets restart_count. An older
    // store knows only the count since the last operator start; that is where it begins.
    R"sql(
ALTER TABLE instances ADD COLUMN restarts_total INTEGER NOT NULL DEFAULT 0;
UPDATE instances SET restarts_total = restart_count;
)sql",
    // 12: how many events of each type retention has pruned, so ktesio_events_total (the event
    // log's rows plus these) never goes back when a restarted daemon counts again. Events pruned
    // before this version are not known.
    R"sql(
CREATE TABLE events_pruned (
  type TEXT PRIMARY KEY,
  count INTEGER NOT NULL CHECK (count >= 0)
) STRICT, WITHOUT ROWID;
)sql",
};
constexpr int kMigrationCount = static_cast<int>(std::size(kMigrations));
static_assert(kMigrationCount == kSchemaVersion);

constexpr const char* kInstanceColumns =
    "id, name, kind, snapshot, state, cause, state_since_ms, restart_count, registered_at_ms, "
    "home, pid, pid_start_time, started_at_ms, current_run, memory_kind, shim_pid, "
    "shim_start_time, boot_id, crash_streak, last_exit, restarts_total";

InstanceRow ReadInstance(const Statement& stmt) {
  InstanceRow row;
  row.id = stmt.ColumnInt(0);
  row.name = stmt.ColumnText(1);
  row.kind = stmt.ColumnText(2);
  row.snapshot = stmt.ColumnBlob(3);
  row.state = stmt.ColumnText(4);
  row.cause = stmt.ColumnText(5);
  row.state_since_ms = stmt.ColumnInt(6);
  row.restart_count = stmt.ColumnInt(7);
  row.registered_at_ms = stmt.ColumnInt(8);
  row.home = stmt.ColumnText(9);
  row.pid = stmt.ColumnOptionalInt(10);
  row.pid_start_time = stmt.ColumnOptionalInt(11);
  row.started_at_ms = stmt.ColumnOptionalInt(12);
  row.current_run = stmt.ColumnInt(13);
  row.memory_kind = stmt.ColumnText(14);
  row.shim_pid = stmt.ColumnOptionalInt(15);
  row.shim_start_time = stmt.ColumnOptionalInt(16);
  row.boot_id = stmt.ColumnText(17);
  row.crash_streak = stmt.ColumnInt(18);
  row.last_exit = stmt.ColumnText(19);
  row.restarts_total = stmt.ColumnInt(20);
  return row;
}

}  // namespace

namespace {

// A store that cannot be opened is never touched: the error names the file, what SQLite said,
// and what the operator can do (docs/operations.md, "A damaged store").
absl::Status Unopenable(const std::string& path, const absl::Status& cause) {
  if (cause.code() == absl::StatusCode::kFailedPrecondition) {
    return contract::MakeError(cause.code(), reason::kStoreError,
                               absl::StrCat(path, ": ", cause.message()));
  }
  return contract::MakeError(
      absl::StatusCode::kDataLoss, reason::kStoreError,
      absl::StrCat(path, ": ", cause.message(),
                   ". The file was left as it is. To recover: keep a copy of it (and of its -wal "
                   "file), then either restore a backup (ktesiod --restore BACKUP, made with "
                   "ktctl daemon backup) or move it aside to start with an empty store; "
                   "ktesiod --check reports what it finds. See docs/operations.md, 'A damaged "
                   "store'"));
}

}  // namespace

std::string_view MigrationSql(int version) {
  return version >= 1 && version <= kMigrationCount ? std::string_view(kMigrations[version - 1])
                                                    : std::string_view();
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  absl::StatusOr<Database> db = Database::Open(path);
  if (!db.ok()) {
    return Unopenable(path, db.status());
  }
  std::unique_ptr<Store> store(new Store(std::move(*db)));
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"}) {
    if (absl::Status status = store->db_.Exec(pragma); !status.ok()) {
      return Unopenable(path, status);
    }
  }
  if (absl::Status status = store->Migrate(); !status.ok()) {
    return Unopenable(path, status);
  }
  return store;
}

absl::StatusOr<int> Store::SchemaVersion() {
  KT_ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("PRAGMA user_version"));
  KT_RETURN_IF_ERROR(stmt.Step().status());
  return static_cast<int>(stmt.ColumnInt(0));
}

absl::Status Store::Migrate() {
  absl::StatusOr<int> version = SchemaVersion();
  if (!version.ok()) {
    return version.status();
  }
  if (*version > kSchemaVersion) {
    return contract::MakeError(absl::StatusCode::kFailedPrecondition, reason::kStoreError,
                               absl::StrCat("state.db has schema version ", *version,
                                            " but this ktesiod understands up "
                                            "to version ",
                                            kSchemaVersion,
                                            "; it was written by a newer ktesiod — run "
                                            "that version or restore a backup"));
  }
  for (int next = *version + 1; next <= kSchemaVersion; ++next) {
    absl::Status status = InTransaction([&]() -> absl::Status {
      KT_RETURN_IF_ERROR(db_.Exec(kMigrations[next - 1]));
      return db_.Exec(absl::StrCat("PRAGMA user_version=", next));
    });
    if (!status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status Store::InsertInstance(InstanceRow& row) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          "INSERT INTO instances (name, kind, snapshot, state, cause, state_since_ms, "
          "restart_count, "
          "registered_at_ms, home, pid, pid_start_time, started_at_ms, current_run, memory_kind) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"));
  stmt.Bind(1, row.name).Bind(2, row.kind).BindBlob(3, row.snapshot).Bind(4, row.state);
  stmt.Bind(5, row.cause).Bind(6, row.state_since_ms).Bind(7, row.restart_count);
  stmt.Bind(8, row.registered_at_ms).Bind(9, row.home).Bind(10, row.pid);
  stmt.Bind(11, row.pid_start_time).Bind(12, row.started_at_ms).Bind(13, row.current_run);
  stmt.Bind(14, row.memory_kind);
  KT_RETURN_IF_ERROR(stmt.Run());
  row.id = db_.LastInsertRowId();
  return absl::OkStatus();
}

absl::StatusOr<std::optional<InstanceRow>> Store::FindInstance(const std::string& name) {
  KT_ASSIGN_OR_RETURN(Statement stmt, db_.Prepare(absl::StrCat("SELECT ", kInstanceColumns,
                                                               " FROM instances WHERE name = ?1")));
  stmt.Bind(1, name);
  KT_ASSIGN_OR_RETURN(const bool row, stmt.Step());
  if (!row) {
    return std::optional<InstanceRow>();
  }
  return std::optional<InstanceRow>(ReadInstance(stmt));
}

absl::StatusOr<std::vector<InstanceRow>> Store::ListInstances() {
  KT_ASSIGN_OR_RETURN(Statement stmt, db_.Prepare(absl::StrCat("SELECT ", kInstanceColumns,
                                                               " FROM instances ORDER BY name")));
  std::vector<InstanceRow> rows;
  while (true) {
    KT_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return rows;
    }
    rows.push_back(ReadInstance(stmt));
  }
}

absl::Status Store::UpdateInstance(const InstanceRow& row) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          "UPDATE instances SET state = ?2, cause = ?3, state_since_ms = ?4, restart_count = ?5, "
          "pid = ?6, pid_start_time = ?7, started_at_ms = ?8, current_run = ?9, memory_kind = ?10, "
          "shim_pid = ?11, shim_start_time = ?12, boot_id = ?13, crash_streak = ?14, last_exit = "
          "?15, restarts_total = ?16 "
          "WHERE id = ?1"));
  stmt.Bind(1, row.id).Bind(2, row.state).Bind(3, row.cause).Bind(4, row.state_since_ms);
  stmt.Bind(5, row.restart_count).Bind(6, row.pid).Bind(7, row.pid_start_time);
  stmt.Bind(8, row.started_at_ms).Bind(9, row.current_run).Bind(10, row.memory_kind);
  stmt.Bind(11, row.shim_pid).Bind(12, row.shim_start_time).Bind(13, row.boot_id);
  stmt.Bind(14, row.crash_streak).Bind(15, row.last_exit).Bind(16, row.restarts_total);
  return stmt.Run();
}

absl::Status Store::BeginRun(int64_t instance_id, int64_t run, int64_t started_at_ms) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          "INSERT OR REPLACE INTO runs (instance_id, run, started_at_ms) VALUES (?1, ?2, ?3)"));
  stmt.Bind(1, instance_id).Bind(2, run).Bind(3, started_at_ms);
  return stmt.Run();
}

absl::Status Store::EndRun(int64_t instance_id, int64_t run, int64_t ended_at_ms,
                           const std::string& cause) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          "UPDATE runs SET ended_at_ms = ?3, end_cause = ?4 WHERE instance_id = ?1 AND run = ?2 "
          "AND ended_at_ms IS NULL"));
  stmt.Bind(1, instance_id).Bind(2, run).Bind(3, ended_at_ms).Bind(4, cause);
  return stmt.Run();
}

absl::Status Store::DeleteInstance(int64_t id) {
  KT_ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("DELETE FROM instances WHERE id = ?1"));
  stmt.Bind(1, id);
  return stmt.Run();
}

absl::StatusOr<Store::UsageTotals> Store::Usage(int64_t instance_id, int64_t run) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), "
                  "COALESCE(SUM(CASE WHEN run = ?2 THEN input_tokens END), 0), "
                  "COALESCE(SUM(CASE WHEN run = ?2 THEN output_tokens END), 0), "
                  "COALESCE(SUM(cost_micros), 0), "
                  "COALESCE(SUM(CASE WHEN run = ?2 THEN cost_micros END), 0), "
                  "COALESCE(SUM(priced_events), 0), COALESCE(SUM(unpriced_events), 0), "
                  "COALESCE(SUM(unknown_calls), 0) "
                  "FROM usage_totals WHERE instance_id = ?1"));
  stmt.Bind(1, instance_id).Bind(2, run);
  KT_RETURN_IF_ERROR(stmt.Step().status());
  UsageTotals totals;
  totals.cumulative_input = static_cast<uint64_t>(stmt.ColumnInt(0));
  totals.cumulative_output = static_cast<uint64_t>(stmt.ColumnInt(1));
  totals.run_input = static_cast<uint64_t>(stmt.ColumnInt(2));
  totals.run_output = static_cast<uint64_t>(stmt.ColumnInt(3));
  totals.cumulative_micros = stmt.ColumnInt(4);
  totals.run_micros = stmt.ColumnInt(5);
  totals.priced_events = static_cast<uint64_t>(stmt.ColumnInt(6));
  totals.unpriced_events = static_cast<uint64_t>(stmt.ColumnInt(7));
  totals.unknown_calls = static_cast<uint64_t>(stmt.ColumnInt(8));
  return totals;
}

absl::StatusOr<int64_t> Store::NextSequence(int64_t instance_id, int64_t run) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          "SELECT MAX(COALESCE((SELECT MAX(sequence) + 1 FROM usage_events WHERE instance_id = ?1 "
          "AND run = ?2), 0), COALESCE((SELECT MAX(sequence) + 1 FROM unknown_usage WHERE "
          "instance_id = ?1 AND run = ?2), 0))"));
  stmt.Bind(1, instance_id).Bind(2, run);
  if (absl::StatusOr<bool> row = stmt.Step(); !row.ok()) {
    return row.status();
  }
  return stmt.ColumnInt(0);
}

absl::StatusOr<int64_t> Store::ProxyPort(int64_t instance_id) {
  KT_ASSIGN_OR_RETURN(Statement stmt,
                      db_.Prepare("SELECT proxy_port FROM instances WHERE id = ?1"));
  stmt.Bind(1, instance_id);
  KT_ASSIGN_OR_RETURN(const bool row, stmt.Step());
  return row ? stmt.ColumnInt(0) : 0;
}

absl::Status Store::SetProxyPort(int64_t instance_id, int64_t port) {
  KT_ASSIGN_OR_RETURN(Statement stmt,
                      db_.Prepare("UPDATE instances SET proxy_port = ?2 WHERE id = ?1"));
  stmt.Bind(1, instance_id).Bind(2, port);
  return stmt.Run();
}

absl::StatusOr<int64_t> Store::UsageOffset(int64_t instance_id, int64_t run) {
  KT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT usage_offset FROM runs WHERE instance_id = ?1 AND run = ?2"));
  stmt.Bind(1, instance_id).Bind(2, run);
  KT_ASSIGN_OR_RETURN(const bool row, stmt.Step());
  return row ? stmt.ColumnInt(0) : 0;
}

absl::StatusOr<int64_t> Store::QueryInt(const char* sql) {
  KT_ASSIGN_OR_RETURN(Statement stmt, db_.Prepare(sql));
  KT_ASSIGN_OR_RETURN(const bool row, stmt.Step());
  return row ? stmt.ColumnInt(0) : 0;
}

absl::StatusOr<int64_t> Store::CountInstances() {
  return QueryInt("SELECT COUNT(*) FROM instances");
}

}  // namespace ktesio::daemon::store
