// The store's maintenance end to end with the real binaries: a damaged state.db refuses the
// start naming the file and the way out (and is left untouched); `ktctl daemon backup` copies
// the store consistently while 20 agents report usage; `ktesiod --restore` refuses while a
// daemon owns the state dir, keeps what it replaces, and the restored store serves the same
// ledger, instances and config; `ktesiod --check` reports integrity and orphaned homes without
// writing anything.

#include <sqlite3.h>

#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

namespace fs = std::filesystem;

// Rows of `sql` on the database file `path`, each row's columns joined by '|'.
std::vector<std::string> Rows(const std::string& path, const std::string& sql) {
  std::vector<std::string> rows;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << path;
    sqlite3_close(db);
    return rows;
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  }
  while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    std::string row;
    for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
      const unsigned char* text = sqlite3_column_text(stmt, i);
      row += (i == 0 ? "" : "|") +
             std::string(text == nullptr ? "NULL" : reinterpret_cast<const char*>(text));
    }
    rows.push_back(row);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return rows;
}

std::string Manifest(const std::string& dir, const std::string& args) {
  return WriteProbeManifest(dir, "usage", args);
}

TEST(StoreMaintenance, DamagedStoreRefusesTheStartNamingTheFileAndTheWayOut) {
  DaemonHarness daemon;
  fs::create_directories(daemon.state_dir());
  const std::string db = daemon.state_dir() + "/state.db";
  const std::string garbage(8192, 'x');
  WriteFileOrDie(db, garbage);
  RunResult r =
      RunProcess({KtesiodPath(), "--state-dir", daemon.state_dir(), "--socket", daemon.socket()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("start failed: " + db + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a database"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ktesiod --restore"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("docs/operations.md"), std::string::npos) << r.err;
  EXPECT_EQ(ReadFileOrEmpty(db), garbage) << "the damaged file was changed";
  RunResult check = RunProcess({KtesiodPath(), "--check", "--state-dir", daemon.state_dir()});
  EXPECT_EQ(check.exit_code, 1);
  EXPECT_NE(check.out.find("problem: " + db), std::string::npos) << check.out;
  EXPECT_EQ(ReadFileOrEmpty(db), garbage);
}

TEST(StoreMaintenance, BackupWhileAgentsReportUsageRestoresTheSameLedgerInstancesAndConfig) {
  DaemonHarness source;
  ASSERT_TRUE(source.Start()) << source.DaemonLog();
  constexpr int kAgents = 20;
  for (int i = 0; i < kAgents; ++i) {
    const std::string name = absl::StrCat("u", i);
    const std::string dir =
        Manifest(source.dir() + "/m-" + name,
                 "--usage-lines 60 --usage-input 3 --usage-output 5 --usage-interval-ms 40 "
                 "--heartbeat-ms 60000");
    ASSERT_EQ(source.Ctl({"agent", "register", name, "--manifest", dir}).exit_code, 0);
    ASSERT_EQ(source
                  .Ctl({"agent", "config", "set", name, "budget.tokens.cumulative",
                        absl::StrCat(100000 + i)})
                  .exit_code,
              0);
    // No restart after the restore: the restored daemon finds these runs ended.
    ASSERT_EQ(source.Ctl({"agent", "config", "set", name, "restart.policy", "never"}).exit_code, 0);
    ASSERT_EQ(source.Ctl({"agent", "start", name}).exit_code, 0);
  }
  // Mid-stream: some usage is in, more is coming.
  ASSERT_TRUE(WaitFor([&] {
    std::optional<Json> list = ParseJson(source.Ctl({"agent", "list", "--json"}).out);
    return list.has_value() && (*list)["totals"]["total_input_tokens"].Int() > 300;
  }));
  const std::string backup = source.dir() + "/backup.db";
  RunResult unnamed = source.Ctl({"daemon", "backup", ""});
  EXPECT_EQ(unnamed.exit_code, 2) << unnamed.err;
  EXPECT_NE(unnamed.err.find("needs a FILE"), std::string::npos) << unnamed.err;
  RunResult made = source.Ctl({"daemon", "backup", backup});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_NE(made.out.find("schema version 12"), std::string::npos) << made.out;
  EXPECT_FALSE(fs::exists(backup + ".partial"));
  // The copy is consistent: every run's totals equal its ledger rows, at one instant.
  EXPECT_EQ(Rows(backup, "PRAGMA integrity_check"), std::vector<std::string>{"ok"});
  EXPECT_EQ(Rows(backup,
                 "SELECT instance_id, run, input_tokens, output_tokens FROM usage_totals "
                 "ORDER BY 1, 2"),
            Rows(backup,
                 "SELECT instance_id, run, sum(input_tokens), sum(output_tokens) FROM usage_events "
                 "GROUP BY 1, 2 ORDER BY 1, 2"));
  EXPECT_EQ(Rows(backup, "SELECT count(*) FROM instances"),
            std::vector<std::string>{std::to_string(kAgents)});

  // Let the agents finish, stop everything, and compare with the source's own store.
  ASSERT_TRUE(WaitFor(
      [&] {
        std::optional<Json> list = ParseJson(source.Ctl({"agent", "list", "--json"}).out);
        return list.has_value() &&
               (*list)["totals"]["total_input_tokens"].Int() == kAgents * 60 * 3;
      },
      std::chrono::seconds(30)));
  std::map<std::string, std::string> config;
  for (int i = 0; i < kAgents; ++i) {
    const std::string name = absl::StrCat("u", i);
    config[name] = source.Ctl({"agent", "config", "get", name, "--json"}).out;
  }
  ASSERT_EQ(source.Ctl({"agent", "stop", "--all", "--timeout", "5"}).exit_code, 0);
  ASSERT_EQ(source.Stop(), 0);
  const std::string original = source.state_dir() + "/state.db";
  const std::string last_cursor = Rows(backup, "SELECT max(cursor) FROM events")[0];
  // The backup is exactly the source's history up to its instant: the same events, and ledger
  // rows that are all in the source's ledger.
  const std::string events =
      "SELECT cursor, at_ms, instance, type, payload FROM events WHERE "
      "cursor <= " +
      last_cursor + " ORDER BY cursor";
  EXPECT_EQ(Rows(backup, events), Rows(original, events));
  const std::vector<std::string> copied =
      Rows(backup,
           "SELECT instance_id, run, sequence, input_tokens, output_tokens FROM "
           "usage_events ORDER BY 1, 2, 3");
  const std::vector<std::string> all =
      Rows(original,
           "SELECT instance_id, run, sequence, input_tokens, output_tokens FROM "
           "usage_events ORDER BY 1, 2, 3");
  ASSERT_FALSE(copied.empty());
  ASSERT_LT(copied.size(), all.size()) << "the backup was not taken mid-stream";
  for (const std::string& row : copied) {
    EXPECT_NE(std::find(all.begin(), all.end(), row), all.end()) << row;
  }

  // Restore: refused while a daemon owns the target, then into a fresh state dir.
  DaemonHarness restored;
  ASSERT_TRUE(restored.Start()) << restored.DaemonLog();
  RunResult busy =
      RunProcess({KtesiodPath(), "--restore", backup, "--state-dir", restored.state_dir()});
  EXPECT_EQ(busy.exit_code, 1);
  EXPECT_NE(busy.err.find("already owns the state dir"), std::string::npos) << busy.err;
  ASSERT_EQ(restored.Stop(), 0);
  const std::string replaced_bytes = ReadFileOrEmpty(restored.state_dir() + "/state.db");
  RunResult put =
      RunProcess({KtesiodPath(), "--restore", backup, "--state-dir", restored.state_dir()});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_NE(put.out.find("the store it replaced is kept as"), std::string::npos) << put.out;
  bool kept = false;
  for (const auto& entry : fs::directory_iterator(restored.state_dir())) {
    kept |= entry.path().filename().string().rfind("state.db.before-restore-", 0) == 0 &&
            ReadFileOrEmpty(entry.path()) == replaced_bytes;
  }
  EXPECT_TRUE(kept) << "the replaced store was not kept";
  RunResult check = RunProcess({KtesiodPath(), "--check", "--state-dir", restored.state_dir()});
  EXPECT_EQ(check.exit_code, 0) << check.out;
  EXPECT_NE(check.out.find("integrity: ok"), std::string::npos) << check.out;

  // The restored daemon reconciles the runs the backup recorded as live: it ingests the rest
  // of their usage files from the backup's durable cursors, exactly once, so its ledger
  // converges to the source's own, row for row.
  ASSERT_TRUE(restored.Start()) << restored.DaemonLog();
  std::optional<Json> list;
  EXPECT_TRUE(WaitFor([&] {
    list = ParseJson(restored.Ctl({"agent", "list", "--json"}).out);
    return list.has_value() && (*list)["totals"]["total_input_tokens"].Int() == kAgents * 60 * 3;
  })) << restored.Ctl({"agent", "list", "--json"}).out;
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ((*list)["instances"].array.size(), static_cast<size_t>(kAgents));
  for (const auto& [name, expected] : config) {
    EXPECT_EQ(restored.Ctl({"agent", "config", "get", name, "--json"}).out, expected) << name;
  }
  ASSERT_EQ(restored.Stop(), 0);
  EXPECT_EQ(Rows(restored.state_dir() + "/state.db",
                 "SELECT instance_id, run, sequence, input_tokens, output_tokens FROM "
                 "usage_events ORDER BY 1, 2, 3"),
            all);
}

TEST(StoreMaintenance, CheckReportsOrphanedAndMissingHomesReadOnly) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  ASSERT_EQ(daemon.Ctl({"agent", "register", "kept", "--kind", "mock"}).exit_code, 0);
  ASSERT_EQ(daemon.Ctl({"agent", "register", "gone", "--kind", "mock"}).exit_code, 0);
  std::optional<Json> gone = ParseJson(daemon.Ctl({"agent", "show", "gone", "--json"}).out);
  ASSERT_TRUE(gone.has_value());
  fs::remove_all((*gone)["instance"]["agent_home"].string);
  fs::create_directories(daemon.state_dir() + "/agents/stray");
  // Works while the daemon runs, and writes nothing.
  const auto before = fs::last_write_time(daemon.state_dir() + "/state.db");
  RunResult check = RunProcess({KtesiodPath(), "--check", "--state-dir", daemon.state_dir()});
  EXPECT_EQ(check.exit_code, 1) << check.out;
  EXPECT_NE(check.out.find("problem: instance 'gone': its home"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("problem: orphaned agent home " + daemon.state_dir() + "/agents/stray"),
            std::string::npos)
      << check.out;
  EXPECT_NE(check.out.find("integrity: ok"), std::string::npos);
  EXPECT_NE(check.out.find("check: 2 problem(s)"), std::string::npos) << check.out;
  EXPECT_EQ(fs::last_write_time(daemon.state_dir() + "/state.db"), before);
  EXPECT_EQ(daemon.Ctl({"daemon", "status"}).exit_code, 0);
  // Bad usage.
  EXPECT_EQ(RunProcess({KtesiodPath(), "--check", "--restore", "x"}).exit_code, 2);
  RunResult missing = RunProcess({KtesiodPath(), "--restore", daemon.dir() + "/nope.db",
                                  "--state-dir", daemon.dir() + "/other"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nope.db: no such file"), std::string::npos) << missing.err;
  WriteFileOrDie(daemon.dir() + "/junk.db", "not a database at all, not even close......");
  RunResult junk = RunProcess({KtesiodPath(), "--restore", daemon.dir() + "/junk.db", "--state-dir",
                               daemon.dir() + "/other"});
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_NE(junk.err.find("refused"), std::string::npos) << junk.err;
  EXPECT_FALSE(fs::exists(daemon.dir() + "/other/state.db"));
}

}  // namespace
}  // namespace ktesio::testing
