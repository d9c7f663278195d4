#pragma once

// The durable state store: one SQLite file (WAL) holding instances, the event log and (later)
// runs and the usage ledger. The store is the truth: every transition is committed here before
// it is acted on or reported.
//
// Thread-safety: not thread-safe. The engine uses it from its single owner thread.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "store/sqlite.h"

namespace ktesio::daemon::store {

// The schema version this binary writes (PRAGMA user_version).
inline constexpr int kSchemaVersion = 12;

// How many events a reader of the event log takes at once (the event feed's batch), and so the
// most events one span row holds (LedgerWriter): each read of a span copies and splits its whole
// row, so spans longer than a read made a replay quadratic (200,000 events from one burst took
// 9-26 s instead of 0.5 s).
inline constexpr int64_t kEventReadBatch = 512;

// The SQL of schema migration `version` (1..kSchemaVersion) exactly as Open applies it; "" out of
// range. A shipped migration never changes: daemon_store_migration_test pins each one's hash and
// builds the populated stores of earlier versions from these.
std::string_view MigrationSql(int version);

struct InstanceRow {
  int64_t id = 0;
  std::string name;
  std::string kind;
  std::string snapshot;  // serialized ktesio.v1.AdapterSnapshot
  std::string state;     // wire string, e.g. "registered"
  std::string cause;
  int64_t state_since_ms = 0;
  int64_t restart_count = 0;  // automatic restarts since the last operator start
  int64_t registered_at_ms = 0;
  std::string home;
  std::optional<int64_t> pid;
  std::optional<int64_t> pid_start_time;
  std::optional<int64_t> started_at_ms;
  int64_t current_run = 0;
  std::string memory_kind;  // "" | "filesystem" | "native"
  // The write-ahead spawn record: who runs the agent, verified by pid + start time.
  std::optional<int64_t> shim_pid;
  std::optional<int64_t> shim_start_time;
  std::string boot_id;         // the kernel boot the processes belong to
  int64_t crash_streak = 0;    // consecutive crashes (restart backoff)
  std::string last_exit;       // "exit code 3", "signal 9 (SIGKILL)", ...
  int64_t restarts_total = 0;  // automatic restarts over the instance's life, never reset
};

// The two persisted logs. Each has its own cursor sequence, so the audit trail never leaves gaps
// in the cursors of the lifecycle/usage/breach event stream.
enum class EventLog { kEvents, kAudit };

struct EventRow {
  int64_t cursor = 0;
  int64_t at_ms = 0;
  std::string instance;
  std::string type;
  std::string payload_json;
};

class Store {
 public:
  // Opens or creates the store at `path`, applying migrations up to kSchemaVersion.
  // Errors: FAILED_PRECONDITION/STORE_ERROR when the file was written by a newer binary (both
  // versions named); INTERNAL/STORE_ERROR on any SQLite failure.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);

  // The schema version recorded in the file.
  absl::StatusOr<int> SchemaVersion();

  // Inserts a new instance; sets row.id. Errors: ALREADY_EXISTS/STORE_ERROR on a duplicate name.
  absl::Status InsertInstance(InstanceRow& row);
  // Errors: INTERNAL/STORE_ERROR. Returns nullopt when no such instance.
  absl::StatusOr<std::optional<InstanceRow>> FindInstance(const std::string& name);
  // Ordered by name.
  absl::StatusOr<std::vector<InstanceRow>> ListInstances();
  // Rewrites every mutable column of an existing instance (matched by id).
  absl::Status UpdateInstance(const InstanceRow& row);
  absl::Status DeleteInstance(int64_t id);

  // Runs: one per start or restart. EndRun only closes an open run.
  absl::Status BeginRun(int64_t instance_id, int64_t run, int64_t started_at_ms);
  absl::Status EndRun(int64_t instance_id, int64_t run, int64_t ended_at_ms,
                      const std::string& cause);

  // Appends an event and returns its cursor (strictly increasing, never reused).
  absl::StatusOr<int64_t> AppendEvent(const EventRow& event, EventLog log = EventLog::kEvents);
  // Appends `span` consecutive events of one instance and type in one row (store_events.cc):
  // `payloads` is their documents joined by '\n'. Returns the last of their cursors; the others
  // are the ones just before it. ReadEvents returns them one by one.
  absl::StatusOr<int64_t> AppendEventSpan(int64_t at_ms, const std::string& instance,
                                          const std::string& type, const std::string& payloads,
                                          int64_t span);
  // Usage totals of one instance: over every run, and over `run` alone.
  struct UsageTotals {
    uint64_t cumulative_input = 0;
    uint64_t cumulative_output = 0;
    uint64_t run_input = 0;
    uint64_t run_output = 0;
    int64_t cumulative_micros = 0;  // over priced events only
    int64_t run_micros = 0;
    uint64_t priced_events = 0;
    uint64_t unpriced_events = 0;
    uint64_t unknown_calls = 0;  // metered calls whose usage was absent (every run)
  };
  absl::StatusOr<UsageTotals> Usage(int64_t instance_id, int64_t run);
  // The durable ingestion cursor of a run's usage file (0 when the run is unknown).
  absl::StatusOr<int64_t> UsageOffset(int64_t instance_id, int64_t run);
  // The next free sequence of a run across the ledger and the unknown-usage log (0 when empty).
  absl::StatusOr<int64_t> NextSequence(int64_t instance_id, int64_t run);

  // The loopback port of an engine-observed instance's metering proxy (0: none). Kept so a
  // restarted daemon re-listens where a re-adopted agent's base URL points.
  absl::StatusOr<int64_t> ProxyPort(int64_t instance_id);
  absl::Status SetProxyPort(int64_t instance_id, int64_t port);

  // Labels (store_labels.cc). Replaces every label of one instance.
  using Labels = std::map<std::string, std::string>;
  absl::Status SetLabels(int64_t instance_id, const Labels& labels);
  absl::StatusOr<Labels> GetLabels(int64_t instance_id);
  // Every instance's labels, by instance id (instances without labels are absent).
  absl::StatusOr<std::map<int64_t, Labels>> AllLabels();

  // Retention (store_retention.cc), each a bounded batch so pruning never holds the writer
  // long. Events of `log` with at_ms < before_ms or more than keep_max behind the newest
  // (keep_max <= 0: no count limit), never the newest row; at most `limit` rows (a usage span
  // is one row, kept or pruned whole); returns how many events went.
  absl::StatusOr<int64_t> PruneEvents(EventLog log, int64_t before_ms, int64_t keep_max,
                                      int64_t limit);
  // Per-call ledger rows (usage_events, unknown_usage) of runs that ended before
  // ended_before_ms; totals stay in usage_totals. At most `limit`; returns how many.
  absl::StatusOr<int64_t> PruneLedger(int64_t ended_before_ms, int64_t limit);
  // The oldest retained cursor of `log` (0 when it is empty).
  absl::StatusOr<int64_t> FirstCursor(EventLog log);
  // Runs that ended in [from_ms, to_ms), with their instance's home (for their usage copies).
  struct EndedRun {
    std::string home;
    int64_t run = 0;
  };
  absl::StatusOr<std::vector<EndedRun>> RunsEndedBetween(int64_t from_ms, int64_t to_ms);

  // How many instances are registered.
  absl::StatusOr<int64_t> CountInstances();
  // The newest cursor (0 when the log is empty).
  absl::StatusOr<int64_t> LastCursor(EventLog log = EventLog::kEvents);
  // Events of `log` with cursor > after, optionally for one instance, at most `limit`.
  absl::StatusOr<std::vector<EventRow>> ReadEvents(int64_t after, const std::string& instance,
                                                   int64_t limit, EventLog log = EventLog::kEvents);

  // Telemetry reads (store_metrics.cc). Persisted events of the main log per type, counting
  // only cursors > `after` (so a reader can keep running totals at the cost of new rows only).
  struct EventCounts {
    std::map<std::string, uint64_t> by_type;
    int64_t last_cursor = 0;  // the newest cursor counted; `after` when none
  };
  // The events after cursor `after` by type; `with_pruned` adds every event retention ever
  // pruned (events_pruned), for a first count.
  absl::StatusOr<EventCounts> CountEvents(int64_t after, bool with_pruned);
  // Budget breaches over every run, per instance name and action.
  struct BreachCount {
    std::string instance;
    std::string action;
    uint64_t count = 0;
  };
  absl::StatusOr<std::vector<BreachCount>> CountBreaches();

  // Budget breaches whose pause/stop has not been seen through yet (store_metrics.cc): the
  // ledger writer records them pending, in the breach's own transaction.
  struct PendingBreach {
    int64_t instance_id = 0;
    int64_t run = 0;
    std::string scope;
    std::string dimension;
    int64_t limit = 0;
    int64_t observed = 0;
    std::string action;  // "pause" | "stop"
  };
  absl::StatusOr<std::vector<PendingBreach>> PendingBreaches();
  // Whether run `run` of the instance crossed a limit whose action pauses or stops it (the
  // proxy's block on its model calls lasts until the operator resumes it).
  absl::StatusOr<bool> RunBreachedToBlock(int64_t instance_id, int64_t run);
  // Marks the pending breaches of (instance, run) done: the instance left running.
  absl::Status ClearPendingBreaches(int64_t instance_id, int64_t run);

  // Runs `body` in one IMMEDIATE transaction; rolled back when it returns an error.
  template <typename Fn>
  absl::Status InTransaction(Fn&& body) {
    absl::StatusOr<Transaction> tx = Transaction::Begin(db_);
    if (!tx.ok()) {
      return tx.status();
    }
    if (absl::Status status = body(); !status.ok()) {
      return status;
    }
    return tx->Commit();
  }

  Database& db() { return db_; }

 private:
  // PruneEvents' exact count limit for the oldest span row (store_retention.cc).
  // Adds the documents it drops to `by_type`.
  absl::StatusOr<int64_t> TrimOldestSpan(int64_t keep_max, std::map<std::string, int64_t>* by_type);
  // The first column of the first row of a statement without parameters (0 when no row).
  absl::StatusOr<int64_t> QueryInt(const char* sql);
  explicit Store(Database db) : db_(std::move(db)) {}
  absl::Status Migrate();

  Database db_;
};

}  // namespace ktesio::daemon::store
