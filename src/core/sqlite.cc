#include "core/sqlite.h"

#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

namespace portkit::sql {

// ---- Statement -------------------------------------------------------------------------------

Statement::Statement(Statement&& o) noexcept : stmt_(std::exchange(o.stmt_, nullptr)), db_(o.db_) {}

Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    if (stmt_) sqlite3_finalize(stmt_);
    stmt_ = std::exchange(o.stmt_, nullptr);
    db_ = o.db_;
  }
  return *this;
}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Statement& Statement::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Statement& Statement::Bind(int index, std::string_view text) {
  sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}
Statement& Statement::BindStatic(int index, std::string_view text) {
  sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8);
  return *this;
}
Statement& Statement::BindBlob(int index, const void* data, size_t size) {
  sqlite3_bind_blob64(stmt_, index, data, size, SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Expected<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status st = db_->Error("statement failed");
  sqlite3_reset(stmt_);
  return st;
}

Status Statement::Run() {
  while (true) {
    auto row = Step();
    if (!row.ok()) {
      Reset();
      return row.status();
    }
    if (!*row) break;
  }
  Reset();
  return Status::Ok();
}

Status Statement::RunKeepingBindings() {
  int rc;
  while ((rc = sqlite3_step(stmt_)) == SQLITE_ROW) {
  }
  if (rc == SQLITE_DONE) {
    sqlite3_reset(stmt_);
    return Status::Ok();
  }
  Status st = db_->Error("statement failed");
  sqlite3_reset(stmt_);
  return st;
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::Double(int column) const { return sqlite3_column_double(stmt_, column); }
std::string_view Statement::Text(int column) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (!p) return {};
  return {p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))};
}
bool Statement::IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
int Statement::ColumnCount() const { return sqlite3_column_count(stmt_); }

// ---- Database --------------------------------------------------------------------------------

Expected<Database> Database::Open(const std::filesystem::path& path, const OpenOptions& options) {
  Database db;
  db.path_ = path.string();
  db.read_only_ = options.read_only;
  int flags = options.read_only ? SQLITE_OPEN_READONLY
                                : SQLITE_OPEN_READWRITE | (options.create ? SQLITE_OPEN_CREATE : 0);
  flags |= SQLITE_OPEN_NOMUTEX;
  std::string name = db.path_;
  if (options.read_only && options.immutable) {
    // A URI filename: '%', '?' and '#' are escaped.
    name = "file:";
    for (char c : db.path_) {
      if (c == '%' || c == '?' || c == '#') {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
        name += hex;
      } else {
        name += c;
      }
    }
    name += "?immutable=1";
    flags |= SQLITE_OPEN_URI;
  }
  int rc = sqlite3_open_v2(name.c_str(), &db.db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db.db_ ? sqlite3_errmsg(db.db_) : sqlite3_errstr(rc);
    return Status(rc == SQLITE_CANTOPEN ? ErrorCode::kIo : ErrorCode::kIo,
                  db.path_ + ": cannot open the database: " + msg);
  }
  sqlite3_extended_result_codes(db.db_, 1);
  sqlite3_busy_timeout(db.db_, options.busy_timeout_ms);
  // A file that is not SQLite only shows itself on the first read.
  if (Status st = db.Exec("SELECT count(*) FROM sqlite_master"); !st.ok())
    return Status(ErrorCode::kParse, db.path_ + ": not a SQLite database, or a damaged one (" + st.message() + ")");
  if (options.read_only) return db;
  if (options.page_size > 0)
    PORTKIT_RETURN_IF_ERROR(db.Exec("PRAGMA page_size = " + std::to_string(options.page_size)));
  if (options.wal) {
    // Two processes switching a new database to WAL at once: the loser gets SQLITE_BUSY at once,
    // without SQLite calling the busy handler, so it waits here as the busy timeout would.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);
    while (true) {
      Status st = db.Exec("PRAGMA journal_mode=WAL");
      if (st.ok()) break;
      if ((sqlite3_errcode(db.db_) & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) return st;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return db;
}

Database::Database(Database&& o) noexcept
    : db_(std::exchange(o.db_, nullptr)), path_(std::move(o.path_)), read_only_(o.read_only_) {}

Database& Database::operator=(Database&& o) noexcept {
  if (this != &o) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(o.db_, nullptr);
    path_ = std::move(o.path_);
    read_only_ = o.read_only_;
  }
  return *this;
}

Database::~Database() {
  if (db_) sqlite3_close_v2(db_);
}

Status Database::Error(std::string_view what) const {
  int code = db_ ? sqlite3_errcode(db_) : SQLITE_ERROR;
  ErrorCode ec = ErrorCode::kIo;
  int primary = code & 0xff;
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) ec = ErrorCode::kParse;
  if (primary == SQLITE_CONSTRAINT || primary == SQLITE_MISMATCH) ec = ErrorCode::kInvalidArgument;
  std::string msg = path_ + ": " + std::string(what);
  if (db_) msg += std::string(": ") + sqlite3_errmsg(db_);
  return Status(ec, msg);
}

Status Database::Exec(std::string_view sql) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string msg = err ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  int primary = rc & 0xff;
  ErrorCode ec = (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) ? ErrorCode::kParse : ErrorCode::kIo;
  return Status(ec, path_ + ": " + msg);
}

Expected<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return Error("cannot prepare a statement");
  return Statement(stmt, this);
}

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int Database::Changes() const { return sqlite3_changes(db_); }

Expected<int> Database::UserVersion() {
  auto st = Prepare("PRAGMA user_version");
  if (!st.ok()) return st.status();
  auto row = st->Step();
  if (!row.ok()) return row.status();
  return static_cast<int>(*row ? st->Int(0) : 0);
}

Status Database::SetUserVersion(int version) {
  return Exec("PRAGMA user_version = " + std::to_string(version));
}

Expected<bool> Database::HasTables() {
  auto st = Prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table'");
  if (!st.ok()) return st.status();
  auto row = st->Step();
  if (!row.ok()) return row.status();
  return *row && st->Int(0) > 0;
}

// ---- Transaction -----------------------------------------------------------------------------

Transaction::Transaction(Database& db, Mode mode) : db_(db) {
  begin_status_ = db_.Exec(mode == Mode::kImmediate ? "BEGIN IMMEDIATE" : "BEGIN");
  open_ = begin_status_.ok();
}

Transaction::~Transaction() { Rollback(); }

Status Transaction::Commit() {
  if (!open_) return begin_status_.ok() ? Status(ErrorCode::kInternal, db_.path() + ": no open transaction")
                                        : begin_status_;
  Status st = db_.Exec("COMMIT");
  if (!st.ok()) {
    Rollback();
    return st;
  }
  open_ = false;
  return Status::Ok();
}

void Transaction::Rollback() {
  if (!open_) return;
  open_ = false;
  // Only when SQLite still has the transaction open (an error may have ended it already).
  if (!sqlite3_get_autocommit(db_.raw())) (void)db_.Exec("ROLLBACK");
}

// ---- Schema ----------------------------------------------------------------------------------

namespace {

/// What to do with a store at `have` (tables present or not): ok, create, migrate, or refuse.
Status RefuseUnlessUsable(Database& db, const Schema& schema, int have, bool tables) {
  std::string what(schema.what);
  std::string remedy = schema.remedy.empty() ? "" : "; " + std::string(schema.remedy);
  if (have == 0 && !tables) {
    if (db.read_only())
      return Status(ErrorCode::kNotFound, db.path() + ": empty, not a " + what + " (opened read-only)");
    return Status::Ok();  // created by the caller
  }
  if (have == 0)
    return Status(ErrorCode::kUnsupported,
                  db.path() + ": a " + what + " without a schema version (written by an older portkit, or not by "
                  "portkit); this portkit reads schema " + std::to_string(schema.version) + remedy);
  if (have > schema.version)
    return Status(ErrorCode::kUnsupported,
                  db.path() + ": " + what + " schema " + std::to_string(have) + " is newer than this portkit reads (" +
                      std::to_string(schema.version) + "); use a newer portkit" + remedy);
  if (have < schema.version - static_cast<int>(schema.migrations.size()) || db.read_only())
    return Status(ErrorCode::kUnsupported,
                  db.path() + ": " + what + " schema " + std::to_string(have) + " is older than this portkit reads (" +
                      std::to_string(schema.version) + ")" + (db.read_only() ? " and it is read-only" : "") + remedy);
  return Status::Ok();
}

Status ReadSchemaState(Database& db, int* have, bool* tables) {
  auto version = db.UserVersion();
  if (!version.ok()) return version.status();
  auto has_tables = db.HasTables();
  if (!has_tables.ok()) return has_tables.status();
  *have = *version;
  *tables = *has_tables;
  return Status::Ok();
}

}  // namespace

Status EnsureSchema(Database& db, const Schema& schema) {
  int have = 0;
  bool tables = false;
  {
    // One read snapshot: the version and the tables read in two statements without it can straddle
    // another process's creating commit (version 0 from before, tables from after).
    Transaction snapshot(db, Transaction::Mode::kDeferred);
    PORTKIT_RETURN_IF_ERROR(snapshot.status());
    PORTKIT_RETURN_IF_ERROR(ReadSchemaState(db, &have, &tables));
    PORTKIT_RETURN_IF_ERROR(snapshot.Commit());
  }
  if (have == schema.version) return Status::Ok();
  PORTKIT_RETURN_IF_ERROR(RefuseUnlessUsable(db, schema, have, tables));
  // Creating or migrating: take the write lock first and look again, so that of two processes
  // creating the same new store one creates it and the other finds it made.
  Transaction tx(db);
  PORTKIT_RETURN_IF_ERROR(tx.status());
  PORTKIT_RETURN_IF_ERROR(ReadSchemaState(db, &have, &tables));
  if (have == schema.version) return tx.Commit();
  PORTKIT_RETURN_IF_ERROR(RefuseUnlessUsable(db, schema, have, tables));
  if (have == 0) {
    PORTKIT_RETURN_IF_ERROR(db.Exec(schema.create_sql));
  } else {
    for (int v = have; v < schema.version; ++v) {
      size_t step = schema.migrations.size() - static_cast<size_t>(schema.version - v);
      PORTKIT_RETURN_IF_ERROR(db.Exec(schema.migrations[step]));
    }
  }
  PORTKIT_RETURN_IF_ERROR(db.SetUserVersion(schema.version));
  return tx.Commit();
}

}  // namespace portkit::sql
