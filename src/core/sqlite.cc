#include "core/sqlite.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>
#include <utility>

namespace portkit::sql {

// ---- Result codes ----------------------------------------------------------------------------

std::string DescribeResultCode(int code) {
  switch (code & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return "not a SQLite database, or a damaged one";
    case SQLITE_FULL:
      return "the disk is full (no room for the database or its journal; free some space and run again)";
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH: return "cannot be written (permission denied, or a read-only file system)";
    case SQLITE_CANTOPEN:
      return "cannot be opened (missing, permission denied, or a folder it needs cannot be written)";
    case SQLITE_IOERR: return "an input/output error of the file system";
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return "locked by another process for longer than the wait allows";
    case SQLITE_NOMEM: return "out of memory";
    case SQLITE_TOOBIG: return "over the limit: a string or blob longer than the limit";
    case SQLITE_INTERRUPT: return "interrupted";
    case SQLITE_CONSTRAINT: return "a constraint failed";
    case SQLITE_RANGE:
    case SQLITE_MISMATCH: return "a value of the wrong type";
    default: return "a database error";
  }
}

ErrorCode ErrorCodeForResult(int code) {
  switch (code & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return ErrorCode::kParse;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG: return ErrorCode::kInvalidArgument;
    default: return ErrorCode::kIo;
  }
}

namespace {

/// For a permission problem: which of the file and its folder cannot be written, or that the
/// file system is read-only ("" when neither shows; root passes every permission check).
std::string WhatCannotBeWritten(const std::string& path) {
  if (path.empty() || path == ":memory:") return "";
  std::filesystem::path p(path);
  std::string folder = p.parent_path().empty() ? "." : p.parent_path().string();
  if (::access(folder.c_str(), W_OK) != 0)
    return errno == EROFS ? "the file system of " + folder + " is read-only"
                          : "the folder " + folder + " is not writable (" + std::strerror(errno) + ")";
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), W_OK) != 0)
    return errno == EROFS ? "the file system of " + folder + " is read-only"
                          : std::string("the file is not writable (") + std::strerror(errno) + ")";
  return "";
}

/// Whether an I/O error is a full disk: the failed system call's errno (ENOSPC, EDQUOT), or, when
/// SQLite kept none, a folder with no free block left (SQLite reports a write or a shared-memory
/// file it cannot grow as SQLITE_IOERR, not SQLITE_FULL).
bool IsDiskFull(sqlite3* db, const std::string& path) {
  const int err = db ? sqlite3_system_errno(db) : 0;
  if (err == ENOSPC || err == EDQUOT) return true;
  if (err != 0 || path.empty() || path == ":memory:") return false;
  std::filesystem::path p(path);
  struct statvfs fs {};
  std::string folder = p.parent_path().empty() ? "." : p.parent_path().string();
  return ::statvfs(folder.c_str(), &fs) == 0 && fs.f_bavail == 0;
}

}  // namespace

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
  // SQLite's memory statistics are never read: off, each of its allocations skips a process-wide
  // mutex (a bulk import makes several per row). Set once, before SQLite initialises; refused
  // after that (the default then stays, which is harmless).
  [[maybe_unused]] static const bool memstatus_off = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  Database db;
  db.path_ = path.string();
  db.read_only_ = options.read_only;
  int flags =
      options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (options.create ? SQLITE_OPEN_CREATE : 0);
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
    int code = db.db_ ? sqlite3_extended_errcode(db.db_) : rc;
    return db.ErrorFor(code, "cannot open the database", db.db_ ? sqlite3_errmsg(db.db_) : sqlite3_errstr(rc));
  }
  sqlite3_extended_result_codes(db.db_, 1);
  sqlite3_busy_timeout(db.db_, options.busy_timeout_ms);
  db.limit_remedy_ = std::string(options.limit_remedy);
  if (options.max_value_bytes > 0)
    sqlite3_limit(db.db_, SQLITE_LIMIT_LENGTH,
                  static_cast<int>(std::min<int64_t>(options.max_value_bytes, int64_t{1} << 30)));
  // Nothing stored in the file may call a function with side effects, and the file cannot be
  // told to damage itself; views and triggers of a file portkit did not write are not run.
  sqlite3_db_config(db.db_, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_db_config(db.db_, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  if (!options.run_stored_views) sqlite3_db_config(db.db_, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
  if (!options.run_stored_triggers) sqlite3_db_config(db.db_, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
  // A file that is not SQLite only shows itself on the first read; so does a folder that cannot
  // be written (the journal of a WAL database) or a full disk.
  if (Status st = db.Exec("SELECT count(*) FROM sqlite_master"); !st.ok()) return st;
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
    : db_(std::exchange(o.db_, nullptr)),
      path_(std::move(o.path_)),
      read_only_(o.read_only_),
      limit_remedy_(std::move(o.limit_remedy_)) {}

Database& Database::operator=(Database&& o) noexcept {
  if (this != &o) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(o.db_, nullptr);
    path_ = std::move(o.path_);
    read_only_ = o.read_only_;
    limit_remedy_ = std::move(o.limit_remedy_);
  }
  return *this;
}

Database::~Database() {
  if (db_) sqlite3_close_v2(db_);
}

Status Database::Error(std::string_view what) const {
  int code = db_ ? sqlite3_extended_errcode(db_) : SQLITE_ERROR;
  return ErrorFor(code, what, db_ ? sqlite3_errmsg(db_) : "");
}

Status Database::ErrorFor(int code, std::string_view what, std::string_view sqlite_message) const {
  const int primary = code & 0xff;
  std::string msg = path_;
  if (!what.empty()) msg += ": " + std::string(what);
  // A plain SQL error (a missing table or column) is SQLite's own words; the others say what the
  // code means, with SQLite's words after it.
  if (primary == SQLITE_ERROR) {
    if (!sqlite_message.empty()) msg += ": " + std::string(sqlite_message);
    return Status(ErrorCode::kIo, msg);
  }
  // A database that cannot be opened for writing because of where it lives says that it cannot
  // be written, and why (the folder, the file, a read-only file system).
  std::string which;
  if (primary == SQLITE_READONLY || primary == SQLITE_PERM || primary == SQLITE_AUTH || primary == SQLITE_CANTOPEN)
    which = WhatCannotBeWritten(path_);
  if (primary == SQLITE_CANTOPEN && !which.empty() && !read_only_) msg += ": cannot be written";
  else if (primary == SQLITE_IOERR && IsDiskFull(db_, path_)) msg += ": " + DescribeResultCode(SQLITE_FULL);
  else msg += ": " + DescribeResultCode(code);
  if (primary == SQLITE_TOOBIG) {
    const int limit = db_ ? sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, -1) : 0;
    msg += " of " +
           (limit >= (1 << 20) && limit % (1 << 20) == 0 ? std::to_string(limit >> 20) + " MiB"
                                                         : std::to_string(limit) + " bytes") +
           "; not read";
    if (!limit_remedy_.empty()) msg += ". " + limit_remedy_;
    return Status(ErrorCode::kInvalidArgument, msg);
  }
  if (!which.empty()) msg += ": " + which;
  if (!sqlite_message.empty()) msg += " (" + std::string(sqlite_message) + ")";
  return Status(ErrorCodeForResult(code), msg);
}

Status Database::Exec(std::string_view sql) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string msg = err ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  int code = sqlite3_extended_errcode(db_);
  if ((code & 0xff) != (rc & 0xff)) code = rc;
  return ErrorFor(code, "", msg);
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

Status Database::SetUserVersion(int version) { return Exec("PRAGMA user_version = " + std::to_string(version)); }

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
  if (!open_)
    return begin_status_.ok() ? Status(ErrorCode::kInternal, db_.path() + ": no open transaction") : begin_status_;
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

/// One object of a database's schema as sqlite_master lists it; a table's columns as
/// table_xinfo gives them ("name type notnull default pk hidden", one string each).
struct SchemaObject {
  std::string type, table, sql;
  bool is_virtual = false;
  std::vector<std::string> columns;
};
using SchemaObjects = std::map<std::string, SchemaObject>;

/// SQL text with every run of white space made one space, for comparing views and indexes.
std::string NormalizeSql(std::string_view sql) {
  std::string out;
  bool space = false;
  for (char c : sql) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  while (!out.empty() && out.back() == ';') out.pop_back();
  return out;
}

/// SQLite's own bookkeeping tables (ANALYZE's statistics, AUTOINCREMENT's counters): not part of
/// any schema portkit compares.
bool IsSqliteBookkeeping(const std::string& name, const std::string& type) {
  return type == "table" && (name == "sqlite_sequence" || name.rfind("sqlite_stat", 0) == 0);
}

Expected<SchemaObjects> ReadSchemaObjects(Database& db) {
  SchemaObjects out;
  auto q = db.Prepare("SELECT type, name, tbl_name, coalesce(sql, '') FROM main.sqlite_master");
  if (!q.ok()) return q.status();
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    SchemaObject o{std::string(q->Text(0)), std::string(q->Text(2)), NormalizeSql(q->Text(3)), false, {}};
    std::string head = o.sql.substr(0, 12);
    std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::toupper(c); });
    o.is_virtual = o.type == "table" && head != "CREATE TABLE";
    out.emplace(std::string(q->Text(1)), std::move(o));
  }
  // Only real tables: table_xinfo of a virtual table would call its module.
  auto info = db.Prepare(
      "SELECT name, type, \"notnull\", coalesce(dflt_value, ''), pk, hidden FROM pragma_table_xinfo(?1, 'main')");
  if (!info.ok()) return info.status();
  for (auto& [name, o] : out) {
    if (o.type != "table" || o.is_virtual) continue;
    info->Reset();
    info->Bind(1, name);
    while (true) {
      auto row = info->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      std::string type(info->Text(1));
      std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::toupper(c); });
      o.columns.push_back(std::string(info->Text(0)) + " " + type + " " + std::to_string(info->Int(2)) + " " +
                          std::string(info->Text(3)) + " " + std::to_string(info->Int(4)) + " " +
                          std::to_string(info->Int(5)));
    }
  }
  return out;
}

/// The schema `reference_sql` makes in an empty database.
Expected<SchemaObjects> ReferenceObjects(std::string_view reference_sql) {
  auto mem = Database::Open(":memory:");
  if (!mem.ok()) return mem.status();
  PORTKIT_RETURN_IF_ERROR(mem->Exec(reference_sql));
  return ReadSchemaObjects(*mem);
}

std::string ColumnNames(const std::vector<std::string>& columns) {
  std::string out;
  for (const auto& c : columns) out += (out.empty() ? "" : ", ") + c.substr(0, c.find(' '));
  return out;
}

enum class SchemaCheck { kExact, kNoForeignObjects };

Status CheckSchemaObjects(Database& db, std::string_view what, std::string_view reference_sql, std::string_view remedy,
                          SchemaCheck mode) {
  auto ref = ReferenceObjects(reference_sql);
  if (!ref.ok()) return ref.status();
  auto have = ReadSchemaObjects(db);
  if (!have.ok()) return have.status();
  const std::string a = "a " + std::string(what);
  auto refuse = [&](const std::string& why) {
    return Status(ErrorCode::kUnsupported, db.path() + ": not " + a + " as portkit writes it: " + why +
                                               "; refused, nothing in it was read or run" +
                                               (remedy.empty() ? "" : "; " + std::string(remedy)));
  };
  for (const auto& [name, o] : *have) {
    if (IsSqliteBookkeeping(name, o.type)) continue;
    if (o.type == "trigger")
      return refuse("it holds a trigger '" + name + "' on '" + o.table +
                    "' (SQL that would run on portkit's own "
                    "writes), which " +
                    a + " never has");
    if (o.is_virtual) return refuse("'" + name + "' is a virtual table, which " + a + " never has");
    // An older version's indexes (dropped or rebuilt by the migrations) are not foreign; an index
    // runs no SQL of its own, only deterministic expressions.
    if (mode == SchemaCheck::kNoForeignObjects && o.type == "index") continue;
    auto it = ref->find(name);
    if (it == ref->end()) return refuse("it holds a " + o.type + " '" + name + "' that " + a + " does not have");
    const SchemaObject& want = it->second;
    if (o.type != want.type) return refuse("'" + name + "' is a " + o.type + " where " + a + " has a " + want.type);
    if (mode == SchemaCheck::kNoForeignObjects) continue;
    if (o.type == "table" && o.columns != want.columns) {
      const std::string have_names = ColumnNames(o.columns), want_names = ColumnNames(want.columns);
      if (have_names != want_names)
        return refuse("table '" + name + "' has the columns (" + have_names + ") where " + a + " has (" + want_names +
                      ")");
      return refuse("the columns of table '" + name + "' have other types or constraints than " + a + "'s");
    }
    if ((o.type == "view" || o.type == "index") && (o.sql != want.sql || o.table != want.table))
      return refuse("the " + o.type + " '" + name + "' is not " + a + "'s own (its SQL differs)");
  }
  if (mode == SchemaCheck::kExact) {
    for (const auto& [name, want] : *ref)
      if (!have->count(name)) return refuse("it has no " + want.type + " '" + name + "'");
  }
  return Status::Ok();
}

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
    return Status(ErrorCode::kUnsupported, db.path() + ": a " + what +
                                               " without a schema version (written by an older portkit, or not by "
                                               "portkit); this portkit reads schema " +
                                               std::to_string(schema.version) + remedy);
  if (have > schema.version)
    return Status(ErrorCode::kUnsupported, db.path() + ": " + what + " schema " + std::to_string(have) +
                                               " is newer than this portkit reads (" + std::to_string(schema.version) +
                                               "); use a newer portkit" + remedy);
  if (have < schema.version - static_cast<int>(schema.migrations.size()) || db.read_only())
    return Status(ErrorCode::kUnsupported, db.path() + ": " + what + " schema " + std::to_string(have) +
                                               " is older than this portkit reads (" + std::to_string(schema.version) +
                                               ")" + (db.read_only() ? " and it is read-only" : "") + remedy);
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

Status CheckOwnSchema(Database& db, std::string_view what, std::string_view reference_sql, std::string_view remedy) {
  return CheckSchemaObjects(db, what, reference_sql, remedy, SchemaCheck::kExact);
}

Status CheckNoForeignObjects(Database& db, std::string_view what, std::string_view reference_sql,
                             std::string_view remedy) {
  return CheckSchemaObjects(db, what, reference_sql, remedy, SchemaCheck::kNoForeignObjects);
}

Status EnsureSchema(Database& db, const Schema& schema) {
  int have = 0;
  bool tables = false;
  {
    // One read snapshot: the version and the tables read in two statements without it can straddle
    // another process's creating commit (version 0 from before, tables from after).
    Transaction snapshot(db, Transaction::Mode::kDeferred);
    PORTKIT_RETURN_IF_ERROR(snapshot.status());
    PORTKIT_RETURN_IF_ERROR(ReadSchemaState(db, &have, &tables));
    // What the file holds is checked before anything of it is used: exactly portkit's own
    // schema, or (an older version, about to be migrated; a new file) nothing foreign. Tables
    // without a version are refused below whatever they are.
    if (have == schema.version)
      PORTKIT_RETURN_IF_ERROR(CheckOwnSchema(db, schema.what, schema.create_sql, schema.remedy));
    else if (have > 0 ? have < schema.version : !tables)
      PORTKIT_RETURN_IF_ERROR(CheckNoForeignObjects(db, schema.what, schema.create_sql, schema.remedy));
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
