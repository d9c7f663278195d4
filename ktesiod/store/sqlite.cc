#include "store/sqlite.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::store {

namespace reason = contract::reason;

absl::Status SqliteError(sqlite3* db, std::string_view what) {
  const int code = db == nullptr ? SQLITE_ERROR : sqlite3_extended_errcode(db);
  if (code == SQLITE_CONSTRAINT_COMMITHOOK) {  // only the test-only fault seam below sets one
    return contract::MakeError(absl::StatusCode::kInternal, reason::kStoreError,
                               absl::StrCat("store: ", std::string(what),
                                            ": commit refused by an injected store fault "
                                            "(KTESIO_TEST_STORE_FAULT_FILE)"));
  }
  const char* message = db == nullptr ? "no database" : sqlite3_errmsg(db);
  const bool constraint = (code & 0xff) == SQLITE_CONSTRAINT;
  return contract::MakeError(
      constraint ? absl::StatusCode::kAlreadyExists : absl::StatusCode::kInternal,
      reason::kStoreError,
      absl::StrCat("store: ", std::string(what), ": ", message, " (", code, ")"));
}

StatementCache::~StatementCache() {
  for (auto& [sql, statements] : idle_) {
    for (sqlite3_stmt* stmt : statements) {
      sqlite3_finalize(stmt);
    }
  }
}

sqlite3_stmt* StatementCache::Take(std::string_view sql) {
  auto it = idle_.find(std::string(sql));
  if (it == idle_.end() || it->second.empty()) {
    return nullptr;
  }
  sqlite3_stmt* stmt = it->second.back();
  it->second.pop_back();
  return stmt;
}

void StatementCache::Register(sqlite3_stmt* stmt, std::string_view sql) {
  keys_.emplace(stmt, std::string(sql));
}

void StatementCache::Return(sqlite3_stmt* stmt) {
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  auto key = keys_.find(stmt);
  std::vector<sqlite3_stmt*>* idle = key == keys_.end() ? nullptr : &idle_[key->second];
  if (idle == nullptr || idle->size() >= 4) {  // more concurrent copies are not worth keeping
    if (key != keys_.end()) {
      keys_.erase(key);
    }
    sqlite3_finalize(stmt);
    return;
  }
  idle->push_back(stmt);
}

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      cache_(std::exchange(other.cache_, nullptr)),
      bind_error_(other.bind_error_) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    Release();
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    cache_ = std::exchange(other.cache_, nullptr);
    bind_error_ = other.bind_error_;
  }
  return *this;
}

Statement::~Statement() { Release(); }

void Statement::Release() {
  if (stmt_ == nullptr) {
    return;
  }
  if (cache_ != nullptr) {
    cache_->Return(stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
  stmt_ = nullptr;
}

Statement& Statement::Bind(int index, std::string_view text) {
  int rc =
      sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) {
    bind_error_ = rc;
  }
  return *this;
}

Statement& Statement::BindStatic(int index, std::string_view text) {
  int rc = sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8);
  if (rc != SQLITE_OK) {
    bind_error_ = rc;
  }
  return *this;
}

Statement& Statement::BindBlob(int index, std::string_view bytes) {
  int rc = sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) {
    bind_error_ = rc;
  }
  return *this;
}

Statement& Statement::Bind(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) {
    bind_error_ = rc;
  }
  return *this;
}

Statement& Statement::BindNull(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) {
    bind_error_ = rc;
  }
  return *this;
}

Statement& Statement::Bind(int index, const std::optional<int64_t>& value) {
  return value.has_value() ? Bind(index, *value) : BindNull(index);
}

absl::StatusOr<bool> Statement::Step() {
  if (bind_error_ != SQLITE_OK) {
    return contract::MakeError(absl::StatusCode::kInternal, reason::kStoreError,
                               absl::StrCat("store: bind failed: ", sqlite3_errstr(bind_error_)));
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  return SqliteError(db_, sqlite3_sql(stmt_));
}

absl::Status Statement::Run() {
  while (true) {
    KT_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) {
      return absl::OkStatus();
    }
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = SQLITE_OK;
}

int64_t Statement::ColumnInt(int column) const { return sqlite3_column_int64(stmt_, column); }

std::optional<int64_t> Statement::ColumnOptionalInt(int column) const {
  if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) {
    return std::nullopt;
  }
  return sqlite3_column_int64(stmt_, column);
}

std::string Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) {
    return "";
  }
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column));
}

std::string Statement::ColumnBlob(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  if (data == nullptr) {
    return "";
  }
  return std::string(static_cast<const char*>(data), sqlite3_column_bytes(stmt_, column));
}

namespace {

// Test-only fault seam: while the file named by KTESIO_TEST_STORE_FAULT_FILE exists, every
// commit — of an explicit transaction or of a single statement — is turned into a rollback (a
// commit hook), as on a failing disk. docs/testing.md.
bool InjectedCommitFault() {
  static const std::string path = [] {
    const char* value = std::getenv("KTESIO_TEST_STORE_FAULT_FILE");
    return value == nullptr ? std::string() : std::string(value);
  }();
  return !path.empty() && access(path.c_str(), F_OK) == 0;
}

bool FaultSeamArmed() {
  const char* value = std::getenv("KTESIO_TEST_STORE_FAULT_FILE");
  return value != nullptr && *value != '\0';
}

}  // namespace

absl::StatusOr<Database> Database::OpenWith(const std::string& path, int flags) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteError(db, absl::StrCat("open ", path));
    sqlite3_close(db);
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, 5000);
  return Database(db);
}

absl::StatusOr<Database> Database::Open(const std::string& path) {
  absl::StatusOr<Database> db = OpenWith(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (db.ok() && FaultSeamArmed()) {
    sqlite3_commit_hook(
        db->raw(), [](void*) { return InjectedCommitFault() ? 1 : 0; }, nullptr);
  }
  return db;
}

absl::StatusOr<Database> Database::OpenReadOnly(const std::string& path) {
  if (access(path.c_str(), F_OK) != 0) {
    return contract::MakeError(absl::StatusCode::kNotFound, contract::reason::kStoreError,
                               absl::StrCat(path, ": no such file"));
  }
  return OpenWith(path, SQLITE_OPEN_READONLY);
}

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), cache_(std::move(other.cache_)) {}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    Close();
    db_ = std::exchange(other.db_, nullptr);
    cache_ = std::move(other.cache_);
  }
  return *this;
}

Database::~Database() { Close(); }

void Database::Close() {
  cache_.reset();  // finalizes the idle statements first
  if (db_ != nullptr) {
    sqlite3_close(db_);
    db_ = nullptr;
  }
}

absl::StatusOr<Statement> Database::Prepare(std::string_view sql) {
  if (sqlite3_stmt* cached = cache_ ? cache_->Take(sql) : nullptr) {
    return Statement(db_, cached, cache_.get());
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteError(db_, absl::StrCat("prepare ", std::string(sql)));
  }
  if (cache_) {
    cache_->Register(stmt, sql);
  }
  return Statement(db_, stmt, cache_.get());
}

absl::Status Database::Exec(std::string_view sql) {
  std::string copy(sql);
  char* error = nullptr;
  int rc = sqlite3_exec(db_, copy.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = error == nullptr ? "unknown error" : error;
    sqlite3_free(error);
    return contract::MakeError(absl::StatusCode::kInternal, reason::kStoreError,
                               absl::StrCat("store: ", message));
  }
  return absl::OkStatus();
}

int64_t Database::Changes() const { return sqlite3_changes64(db_); }

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

absl::StatusOr<Transaction> Transaction::Begin(Database& db) {
  // BEGIN and COMMIT run as cached statements: sqlite3_exec would parse them at every
  // transaction, and the engine commits one per batch of metered calls.
  KT_ASSIGN_OR_RETURN(Statement begin, db.Prepare("BEGIN IMMEDIATE"));
  KT_RETURN_IF_ERROR(begin.Run());
  return Transaction(&db);
}

Transaction::Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

Transaction::~Transaction() {
  if (db_ != nullptr) {
    db_->Exec("ROLLBACK").IgnoreError();  // a failed rollback leaves SQLite to roll back itself
  }
}

absl::Status Transaction::Commit() {
  absl::StatusOr<Statement> commit = db_->Prepare("COMMIT");
  absl::Status status = commit.ok() ? commit->Run() : commit.status();
  if (status.ok()) {
    db_ = nullptr;
  }
  return status;
}

}  // namespace ktesio::daemon::store
