#pragma once

// A thin RAII layer over the SQLite C API: a connection and prepared statements whose failures
// come back as absl::Status (reason STORE_ERROR). Not thread-safe; the store owns one connection
// used from one thread.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace ktesio::daemon::store {

absl::Status SqliteError(sqlite3* db, std::string_view what);

// Prepared statements kept for reuse, keyed by their SQL text: preparing (parsing and planning
// SQL) costs far more than running the small statements the store issues.
class StatementCache {
 public:
  ~StatementCache();
  sqlite3_stmt* Take(std::string_view sql);
  void Register(sqlite3_stmt* stmt, std::string_view sql);  // a freshly prepared statement
  void Return(sqlite3_stmt* stmt);                          // resets and unbinds it first

 private:
  std::unordered_map<std::string, std::vector<sqlite3_stmt*>> idle_;
  std::unordered_map<sqlite3_stmt*, std::string> keys_;  // every live statement's SQL
};

class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, sqlite3_stmt* stmt, StatementCache* cache = nullptr)
      : db_(db), stmt_(stmt), cache_(cache) {}
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Binds are 1-based, as in SQLite.
  Statement& Bind(int index, std::string_view text);
  // Binds text without copying it: `text` must stay unchanged until the statement is reset
  // or rebound.
  Statement& BindStatic(int index, std::string_view text);
  Statement& BindBlob(int index, std::string_view bytes);
  Statement& Bind(int index, int64_t value);
  Statement& BindNull(int index);
  Statement& Bind(int index, const std::optional<int64_t>& value);

  // Steps once. Returns true when a row is available, false when done.
  // Errors: INTERNAL/STORE_ERROR, ALREADY_EXISTS/STORE_ERROR on a constraint violation.
  absl::StatusOr<bool> Step();
  // Steps to completion, discarding rows.
  absl::Status Run();
  // Steps to completion, calling `row(*this)` for every row.
  template <typename Fn>
  absl::Status ForEach(Fn row) {
    while (true) {
      absl::StatusOr<bool> more = Step();
      if (!more.ok()) {
        return more.status();
      }
      if (!*more) {
        return absl::OkStatus();
      }
      row(*this);
    }
  }
  void Reset();

  int64_t ColumnInt(int column) const;
  std::optional<int64_t> ColumnOptionalInt(int column) const;
  std::string ColumnText(int column) const;
  std::string ColumnBlob(int column) const;

 private:
  void Release();
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  StatementCache* cache_ = nullptr;  // returned there instead of finalized
  int bind_error_ = SQLITE_OK;
};

class Database {
 public:
  // Opens (creating) the database file. Errors: INTERNAL/STORE_ERROR.
  static absl::StatusOr<Database> Open(const std::string& path);
  // Opens an existing database file for reading only (never creates, never writes). Errors:
  // INTERNAL/STORE_ERROR (NOT_FOUND/STORE_ERROR when there is no such file).
  static absl::StatusOr<Database> OpenReadOnly(const std::string& path);

  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  absl::StatusOr<Statement> Prepare(std::string_view sql);
  absl::Status Exec(std::string_view sql);
  int64_t LastInsertRowId() const;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t Changes() const;
  sqlite3* raw() const { return db_; }

 private:
  static absl::StatusOr<Database> OpenWith(const std::string& path, int flags);
  explicit Database(sqlite3* db) : db_(db), cache_(std::make_unique<StatementCache>()) {}
  void Close();
  sqlite3* db_ = nullptr;
  std::unique_ptr<StatementCache> cache_;  // heap: stable across moves of the Database
};

// BEGIN IMMEDIATE ... COMMIT, rolled back on destruction unless committed.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(Database& db);
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  absl::Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_ = nullptr;
};

}  // namespace ktesio::daemon::store
