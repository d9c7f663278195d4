// Upgrades lose nothing: for every earlier schema version there is a store populated at that
// version (the shipped migrations up to N, then tests/fixtures/store: what daemons up to
// version N wrote: instances, spawn records, runs, ledger rows, prices, breaches, unknown-usage
// calls, events; see its README.md). Each must migrate to the current version with every row
// and total intact, read through the Store as the daemon reads it, and keep working (cursors
// continue). Keep adding the layers of the version before each future schema change.

#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "gtest/gtest.h"
#include "status_assertions.h"
#include "store/store.h"

namespace ktesio::daemon::store {
namespace {

std::string ReadLayer(const std::string& name) {
  std::ifstream in(std::string(KTESIO_STORE_FIXTURES) + "/" + name);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The store a version-`version` daemon left: the shipped migrations 1..version (pinned by
// ShippedMigrationsNeverChange), then what each version wrote, data-1..version.sql; "" when a
// data layer is missing.
std::string ReadFixture(int version) {
  std::string schema;
  std::string data;
  for (int k = 1; k <= version; ++k) {
    const std::string rows = ReadLayer("data-" + std::to_string(k) + ".sql");
    if (rows.empty()) {
      return "";
    }
    schema += std::string(MigrationSql(k));
    data += rows;
  }
  return "BEGIN;\n" + schema + data + "PRAGMA user_version=" + std::to_string(version) +
         ";\nCOMMIT;\n";
}

// FNV-1a, 64 bits: a hash that is the same on every platform and compiler.
uint64_t Fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// Integer columns of one query's rows, read straight from the file (not through the Store).
std::vector<std::vector<int64_t>> Ints(const std::string& path, const std::string& sql) {
  std::vector<std::vector<int64_t>> rows;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
  while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    std::vector<int64_t> row;
    for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
      row.push_back(sqlite3_column_int64(stmt, i));
    }
    rows.push_back(row);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return rows;
}

class StoreMigration : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/kt-migrate-XXXXXX";
    dir_ = mkdtemp(templ);
    path_ = dir_ + "/state.db";
    const std::string fixture = ReadFixture(GetParam());
    ASSERT_FALSE(fixture.empty()) << "no fixture for version " << GetParam();
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    ASSERT_EQ(sqlite3_exec(db, fixture.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error == nullptr ? "" : error);
    sqlite3_close(db);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::string path_;
};

TEST_P(StoreMigration, MigratesWithEveryRowAndTotalIntact) {
  const int version = GetParam();
  ASSERT_EQ(Ints(path_, "PRAGMA user_version"), (std::vector<std::vector<int64_t>>{{version}}));
  // What the file holds before the upgrade, read with plain SQL.
  const auto runs = Ints(path_, "SELECT id, current_run FROM instances ORDER BY id");
  std::map<int64_t, std::vector<int64_t>> ledger;  // id -> cumulative in, out, run in, run out
  std::map<int64_t, std::vector<int64_t>> prices;  // id -> cost, priced, unpriced
  std::map<int64_t, int64_t> unknown;
  for (const auto& row : runs) {
    const std::string id = std::to_string(row[0]);
    const std::string run = std::to_string(row[1]);
    if (version >= 3) {
      ledger[row[0]] = {
          Ints(path_, "SELECT coalesce(sum(input_tokens),0) FROM usage_events WHERE instance_id=" +
                          id)[0][0],
          Ints(path_, "SELECT coalesce(sum(output_tokens),0) FROM usage_events WHERE instance_id=" +
                          id)[0][0],
          Ints(path_, "SELECT coalesce(sum(input_tokens),0) FROM usage_events WHERE instance_id=" +
                          id + " AND run=" + run)[0][0],
          Ints(path_, "SELECT coalesce(sum(output_tokens),0) FROM usage_events WHERE instance_id=" +
                          id + " AND run=" + run)[0][0]};
    }
    if (version >= 4) {
      prices[row[0]] = Ints(path_,
                            "SELECT coalesce(sum(cost_micros),0), count(cost_micros), "
                            "count(*) - count(cost_micros) FROM usage_events WHERE instance_id=" +
                                id)[0];
    }
    if (version >= 5) {
      unknown[row[0]] =
          Ints(path_, "SELECT count(*) FROM unknown_usage WHERE instance_id=" + id)[0][0];
    }
  }
  const std::string kLedgerRows =
      "SELECT count(*), coalesce(sum(input_tokens),0), coalesce(sum(output_tokens),0), "
      "coalesce(sum(sequence),0) FROM usage_events";
  const auto ledger_rows = version >= 3 ? Ints(path_, kLedgerRows) : Ints(path_, "SELECT 0");
  // From version 10 one events row may hold several events (its span).
  const int64_t events = Ints(
      path_, version >= 10 ? "SELECT sum(span) FROM events" : "SELECT count(*) FROM events")[0][0];
  const int64_t last_cursor = Ints(path_, "SELECT max(cursor) FROM events")[0][0];
  const int64_t breaches = version >= 4 ? Ints(path_, "SELECT count(*) FROM breaches")[0][0] : 0;

  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(path_);
  KT_ASSERT_OK(opened.status());
  Store& store = **opened;
  absl::StatusOr<int> now = store.SchemaVersion();
  KT_ASSERT_OK(now.status());
  EXPECT_EQ(*now, kSchemaVersion);

  absl::StatusOr<std::vector<InstanceRow>> rows = store.ListInstances();
  KT_ASSERT_OK(rows.status());
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].name, "alpha");
  EXPECT_EQ((*rows)[0].state, "stopped");
  EXPECT_EQ((*rows)[0].current_run, 2);
  EXPECT_EQ((*rows)[1].name, "beta");
  EXPECT_EQ((*rows)[1].cause, "crashed{exit code 3}");
  EXPECT_EQ((*rows)[1].restart_count, 1);
  EXPECT_EQ((*rows)[1].memory_kind, "filesystem");
  EXPECT_EQ((*rows)[1].home, "/var/lib/ktesio/agents/beta");
  EXPECT_EQ((*rows)[1].snapshot, std::string("\x0A\x04"
                                             "beta",
                                             6));
  EXPECT_EQ((*rows)[2].state, "registered");
  // Schema 11: the lifetime count of automatic restarts starts from the count since the last
  // operator start, the best an older store knows.
  EXPECT_EQ((*rows)[0].restarts_total, 0);
  EXPECT_EQ((*rows)[1].restarts_total, 1);
  if (version >= 2) {
    EXPECT_EQ((*rows)[1].shim_pid, 4242);
    EXPECT_EQ((*rows)[1].boot_id, "boot-1");
    EXPECT_EQ((*rows)[1].last_exit, "exit code 3");
    EXPECT_EQ((*rows)[1].crash_streak, 1);
  }

  absl::StatusOr<std::vector<EventRow>> read = store.ReadEvents(0, "", 1000);
  KT_ASSERT_OK(read.status());
  ASSERT_EQ(static_cast<int64_t>(read->size()), events);
  EXPECT_EQ(read->back().cursor, last_cursor);
  EXPECT_EQ((*read)[2].type, "usage_update");
  EXPECT_EQ(
      (*read)[2].payload_json,
      R"({"schema_version":1,"instance":"alpha","run":1,"input_tokens":46,"output_tokens":80})");

  for (const InstanceRow& row : *rows) {
    absl::StatusOr<Store::UsageTotals> usage = store.Usage(row.id, row.current_run);
    KT_ASSERT_OK(usage.status());
    if (version >= 3) {
      const std::vector<int64_t>& want = ledger[row.id];
      EXPECT_EQ(static_cast<int64_t>(usage->cumulative_input), want[0]) << row.name;
      EXPECT_EQ(static_cast<int64_t>(usage->cumulative_output), want[1]) << row.name;
      EXPECT_EQ(static_cast<int64_t>(usage->run_input), want[2]) << row.name;
      EXPECT_EQ(static_cast<int64_t>(usage->run_output), want[3]) << row.name;
    }
    if (version >= 4) {
      EXPECT_EQ(usage->cumulative_micros, prices[row.id][0]) << row.name;
      EXPECT_EQ(static_cast<int64_t>(usage->priced_events), prices[row.id][1]) << row.name;
      EXPECT_EQ(static_cast<int64_t>(usage->unpriced_events), prices[row.id][2]) << row.name;
    }
    if (version >= 5) {
      EXPECT_EQ(static_cast<int64_t>(usage->unknown_calls), unknown[row.id]) << row.name;
    }
  }
  if (version >= 3) {
    EXPECT_EQ(ledger[1][0],
              4 * 10 + 6 + 3 * 7 + 3 + (version >= 9 ? 3 : 0) + (version >= 10 ? 2 + 1 : 0))
        << "the fixture itself changed";
    // Every ledger row survives, read straight from the migrated file.
    EXPECT_EQ(Ints(path_, kLedgerRows), ledger_rows);
    absl::StatusOr<int64_t> next = store.NextSequence(1, 2);
    KT_ASSERT_OK(next.status());
    EXPECT_EQ(*next, version >= 10 ? 6 : version >= 9 ? 4 : 3);
  }
  if (version >= 9) {
    absl::StatusOr<Store::Labels> labels = store.GetLabels(1);
    KT_ASSERT_OK(labels.status());
    EXPECT_EQ(*labels, (Store::Labels{{"ktesio.io/fleet", "lab"}, {"team", "research"}}));
  }
  absl::StatusOr<std::vector<Store::BreachCount>> counted = store.CountBreaches();
  KT_ASSERT_OK(counted.status());
  int64_t total_breaches = 0;
  for (const Store::BreachCount& b : *counted) {
    total_breaches += static_cast<int64_t>(b.count);
  }
  EXPECT_EQ(total_breaches, breaches);
  // Breaches from before pending actions were recorded count as acted on.
  absl::StatusOr<std::vector<Store::PendingBreach>> pending = store.PendingBreaches();
  KT_ASSERT_OK(pending.status());
  EXPECT_TRUE(pending->empty());
  if (version >= 5) {
    absl::StatusOr<int64_t> port = store.ProxyPort(2);
    KT_ASSERT_OK(port.status());
    EXPECT_EQ(*port, 41234);
  }
  if (version >= 3) {
    absl::StatusOr<int64_t> offset = store.UsageOffset(1, 2);
    KT_ASSERT_OK(offset.status());
    EXPECT_EQ(*offset, 4096);
  }

  // It keeps working: cursors continue after the migrated ones; new rows fit the new schema.
  absl::StatusOr<int64_t> cursor =
      store.AppendEvent(EventRow{0, 1764000009000, "gamma", "transition", "{}"});
  KT_ASSERT_OK(cursor.status());
  EXPECT_EQ(*cursor, last_cursor + 1);
  InstanceRow added;
  added.name = "delta";
  added.kind = "mock";
  added.state = "registered";
  added.home = "/h/delta";
  KT_EXPECT_OK(store.InsertInstance(added));
  // Reopening a migrated store changes nothing.
  opened->reset();
  absl::StatusOr<std::unique_ptr<Store>> again = Store::Open(path_);
  KT_ASSERT_OK(again.status());
  absl::StatusOr<int64_t> count = (*again)->CountInstances();
  KT_ASSERT_OK(count.status());
  EXPECT_EQ(*count, 4);
}

INSTANTIATE_TEST_SUITE_P(EveryEarlierVersion, StoreMigration, ::testing::Range(1, kSchemaVersion),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return "v" + std::to_string(param.param);
                         });

// Stores in the field were built by these exact statements: editing a shipped migration would
// leave them with a schema the code no longer describes. Add a new migration instead, and its
// hash here once it ships.
TEST(StoreMigrationFixtures, ShippedMigrationsNeverChange) {
  constexpr uint64_t kShipped[] = {
      0xec05a18af79c0ac2ULL, 0xe66963f0613a6d6dULL, 0x7712df7f17bf7cb6ULL, 0x06e4c272b9d9ad0fULL,
      0x771abe6579c7e66aULL, 0x1a3eac6aa043cff8ULL, 0x1f3daff7a6b8b10bULL, 0x95322cdb6725c630ULL,
      0x635d88e8c14e90edULL, 0x903b55bd173ce722ULL, 0x2fafedaa140a01c0ULL, 0x5551b81317be98e5ULL,
  };
  ASSERT_EQ(std::size(kShipped), static_cast<size_t>(kSchemaVersion))
      << "a new migration: pin its hash here";
  for (int version = 1; version <= kSchemaVersion; ++version) {
    EXPECT_EQ(Fnv1a(MigrationSql(version)), kShipped[version - 1])
        << "migration " << version << " changed after it shipped";
  }
  EXPECT_TRUE(MigrationSql(0).empty());
  EXPECT_TRUE(MigrationSql(kSchemaVersion + 1).empty());
}

TEST(StoreMigrationFixtures, OneForEveryEarlierVersion) {
  for (int version = 1; version < kSchemaVersion; ++version) {
    EXPECT_FALSE(ReadFixture(version).empty())
        << "tests/fixtures/store/data-" << version
        << ".sql is missing: add the data of the version before every schema change "
        << "(tests/fixtures/store/README.md)";
  }
}

}  // namespace
}  // namespace ktesio::daemon::store
