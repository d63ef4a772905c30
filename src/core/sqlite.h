#pragma once
/// A small SQLite wrapper shared by the profile store and the tuning bank: RAII connections and
/// statements, transactions that always end (commit or roll back), a busy timeout, and a schema
/// version (`PRAGMA user_version`) checked on open so that a store written by another portkit
/// is migrated or refused with a message, never silently reused.
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace portkit::sql {

class Database;

/// A prepared statement. Bind indices start at 1, column indices at 0 (SQLite's own).
class Statement {
 public:
  Statement() = default;
  Statement(Statement&& o) noexcept;
  Statement& operator=(Statement&& o) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Statement& Bind(int index, double value);
  /// The text is copied (SQLITE_TRANSIENT), so the view may die after the call.
  Statement& Bind(int index, std::string_view text);
  Statement& Bind(int index, const char* text) { return Bind(index, std::string_view(text)); }
  Statement& Bind(int index, const std::string& text) { return Bind(index, std::string_view(text)); }
  /// The text is not copied (SQLITE_STATIC): it must stay valid until the statement has run and
  /// its parameter is bound again (the profile store's bulk insert, whose texts live in a batch).
  Statement& BindStatic(int index, std::string_view text);
  Statement& BindBlob(int index, const void* data, size_t size);
  Statement& BindNull(int index);

  /// Advances: true with a row, false when done.
  Expected<bool> Step();
  /// Steps to the end (for INSERT/UPDATE/DELETE), then resets the statement for reuse.
  Status Run();
  /// Steps to the end and rewinds, keeping the bindings: for a statement whose every parameter
  /// is bound again before each run (clearing them costs a bulk insert time for nothing).
  Status RunKeepingBindings();
  /// Clears bindings and rewinds, ready for the next use.
  void Reset();

  int64_t Int(int column) const;
  double Double(int column) const;
  /// Valid until the next Step, Reset or destruction.
  std::string_view Text(int column) const;
  bool IsNull(int column) const;
  int ColumnCount() const;

  sqlite3_stmt* raw() const { return stmt_; }

 private:
  friend class Database;
  Statement(sqlite3_stmt* stmt, Database* db) : stmt_(stmt), db_(db) {}
  sqlite3_stmt* stmt_ = nullptr;
  Database* db_ = nullptr;
};

struct OpenOptions {
  bool read_only = false;
  bool create = true;           ///< ignored when read_only
  int busy_timeout_ms = 30000;  ///< how long a writer waits for another one
  bool wal = false;             ///< journal_mode=WAL (concurrent readers with one writer)
  /// page_size for a new database (0: SQLite's default); set before the switch to WAL, which fixes
  /// it. Ignored for an existing database and when read_only.
  int page_size = 0;
  /// With read_only: open as an immutable file (SQLite's `immutable=1`): no locks, no -shm.
  /// Lets a WAL database in a read-only folder be read; only for files nobody writes meanwhile.
  bool immutable = false;
  /// The longest string or blob a statement may read or make, in bytes (SQLITE_LIMIT_LENGTH;
  /// 0: SQLite's own, about 1 GB). SQLite checks it before it loads a value, so a longer one costs
  /// no memory: the statement fails with "over the limit" (kInvalidArgument, see Describe).
  int64_t max_value_bytes = 0;
  /// What a database portkit did not write could make it run: off, the views and triggers stored
  /// in the file (SQLITE_DBCONFIG_ENABLE_VIEW / _TRIGGER; views of the TEMP schema still work)
  /// are never run. Functions with side effects are never allowed in the schema either way
  /// (trusted_schema off), and the file cannot be made to damage itself (DEFENSIVE).
  bool run_stored_views = true;
  bool run_stored_triggers = true;
  /// Words for the over-the-limit message: what raises max_value_bytes (e.g. "--max-string-mb
  /// raises the limit"); empty: the limit is fixed.
  std::string_view limit_remedy;
};

/// What an SQLite result code (extended or primary) means for the user, without SQLite's own
/// words: "not a SQLite database, or a damaged one", "the disk is full", "cannot be written
/// (permission denied, or a read-only file system)", ... For the messages of Database::Error.
std::string DescribeResultCode(int code);
/// The ErrorCode of an SQLite result code: kParse for a damaged file or one that is not SQLite,
/// kInvalidArgument for a constraint or a value over the length limit, kIo otherwise.
ErrorCode ErrorCodeForResult(int code);

class Database {
 public:
  static Expected<Database> Open(const std::filesystem::path& path, const OpenOptions& options = {});
  Database(Database&& o) noexcept;
  Database& operator=(Database&& o) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  /// Runs one or more statements without results.
  Status Exec(std::string_view sql);
  Expected<Statement> Prepare(std::string_view sql);
  int64_t LastInsertRowId() const;
  int Changes() const;
  bool read_only() const { return read_only_; }
  const std::string& path() const { return path_; }
  sqlite3* raw() const { return db_; }

  Expected<int> UserVersion();
  Status SetUserVersion(int version);
  /// Whether the database holds any table (a fresh file holds none).
  Expected<bool> HasTables();

  /// An error naming this database, what failed, what the result code means (DescribeResultCode,
  /// the folder named for a permission problem, the limit and its remedy for a value over it) and
  /// SQLite's own message: "<path>: <what>: <meaning> (<sqlite message>)".
  Status Error(std::string_view what) const;
  /// The same for the result `code` of a call that has no database handle state to read.
  Status ErrorFor(int code, std::string_view what, std::string_view sqlite_message) const;

 private:
  Database() = default;
  sqlite3* db_ = nullptr;
  std::string path_;
  bool read_only_ = false;
  std::string limit_remedy_;
};

/// Prepares `sql` and calls `on_row(statement)` for every row it yields.
template <typename RowFn>
Status ForEachRow(Database& db, std::string_view sql, RowFn on_row) {
  auto q = db.Prepare(sql);
  if (!q.ok()) return q.status();
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    on_row(*q);
  }
}

/// A transaction that always ends: Commit() or, on destruction without a commit, ROLLBACK.
class Transaction {
 public:
  enum class Mode { kDeferred, kImmediate };
  /// Check `status()` (or use Begin) before writing.
  explicit Transaction(Database& db, Mode mode = Mode::kImmediate);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  const Status& status() const { return begin_status_; }
  /// Commits; on failure the transaction is rolled back and the error returned.
  Status Commit();
  /// Rolls back now (also what the destructor does for an open transaction).
  void Rollback();

 private:
  Database& db_;
  bool open_ = false;
  Status begin_status_;
};

/// The schema a store must have. Versions count from 1; `user_version` 0 means "no portkit
/// schema yet" (a new file) or "written before schema versions existed" (tables but 0).
struct Schema {
  std::string_view what;  ///< "profile store", "tuning bank" (for messages)
  int version = 1;
  std::string_view create_sql;  ///< creates the current schema in an empty database
  /// The last steps up to `version`: migrations.back() turns version - 1 into version, the one
  /// before it version - 2 into version - 1, and so on. Versions older than the first step are
  /// refused.
  std::vector<std::string_view> migrations;
  /// What the user should do with a store that cannot be used, e.g. "delete it and import the
  /// traces again".
  std::string_view remedy;
};

/// Brings `db` to `schema`: creates it in an empty database, migrates an older version in one
/// transaction, and refuses (kUnsupported, naming the file, both versions and the remedy) a newer
/// version, an older one without a migration path, or tables without a version. A read-only
/// database is never changed: anything but the current version is refused.
///
/// Before anything is read or written, the objects of the file are checked against the schema's
/// own (CheckOwnSchema when `user_version` is the current version, CheckNoForeignObjects before a
/// migration, and nothing at all but portkit's tables in a file about to be created): a view,
/// trigger, table, column or index that `schema.create_sql` does not make is refused.
Status EnsureSchema(Database& db, const Schema& schema);

/// Refuses (kUnsupported, naming the file, the object and `remedy`) a database whose schema is
/// not exactly the one `reference_sql` makes in an empty database: the same tables with the same
/// columns (name, declared type, NOT NULL, default, key; in order), the same views (their SQL,
/// whitespace aside), the same indexes, and no trigger. A table's SQL text may differ (ALTER TABLE
/// rewrites it). Reads only the schema (sqlite_master and table_xinfo), never a row.
Status CheckOwnSchema(Database& db, std::string_view what, std::string_view reference_sql, std::string_view remedy);
/// The check before a migration (an older version of the schema has fewer columns and other
/// indexes): no trigger, no virtual table, and no table or view whose name `reference_sql` does
/// not make.
Status CheckNoForeignObjects(Database& db, std::string_view what, std::string_view reference_sql,
                             std::string_view remedy);

}  // namespace portkit::sql
