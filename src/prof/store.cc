#include "prof/store.h"

#include "core/input_files.h"
#include "prof/import_limits.h"
#include "prof/importers/chrome_trace.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <algorithm>
#include <array>
#include <iterator>
#include <vector>

namespace portkit::prof {
namespace fs = std::filesystem;

bool IsDeviceTask(EventKind k) { return k == EventKind::kKernel || k == EventKind::kMemcpy || k == EventKind::kMemset; }

const char* EventKindName(EventKind k) {
  switch (k) {
    case EventKind::kCpuOp: return "cpu_op";
    case EventKind::kUserAnnotation: return "user_annotation";
    case EventKind::kGpuAnnotation: return "gpu_user_annotation";
    case EventKind::kKernel: return "kernel";
    case EventKind::kMemcpy: return "gpu_memcpy";
    case EventKind::kMemset: return "gpu_memset";
    case EventKind::kRuntime: return "runtime";
    case EventKind::kDriver: return "driver";
    case EventKind::kSync: return "sync";
    case EventKind::kPythonFunction: return "python_function";
    case EventKind::kStep: return "step";
    case EventKind::kOther: return "other";
  }
  return "other";
}

namespace {
/// How the store's multi-row INSERTs begin. OR FAIL: a row breaking a constraint ends the
/// statement but keeps the rows before it (the trace's transaction is rolled back anyway, so the
/// store gets the same rows), and SQLite then keeps no statement journal. With the default (OR
/// ABORT) every multi-row INSERT first copied the 64 KiB page it appends to into a statement
/// journal: a temporary file written and truncated once per statement (in memory for a store
/// built without a journal on disk, in 1 KiB chunks).
constexpr std::string_view kInsertRows = "INSERT OR FAIL ";
/// Marks inserted per statement by TraceWriter::AddMarks (6 parameters each).
constexpr size_t kMarksPerInsert = 16;
constexpr std::string_view kCreateSchema = R"SQL(
CREATE TABLE strings (id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);
CREATE TABLE traces (
  id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, format TEXT NOT NULL,
  events INTEGER, skipped INTEGER, warning TEXT, marks INTEGER, base_ns INTEGER);
CREATE TABLE devices (
  trace INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, properties TEXT);
CREATE TABLE events (
  trace INTEGER NOT NULL, kind TEXT NOT NULL, name INTEGER NOT NULL, category INTEGER,
  ts INTEGER NOT NULL, dur INTEGER NOT NULL, pid INTEGER, tid INTEGER,
  correlation INTEGER, external_id INTEGER,
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER, block_z INTEGER,
  registers INTEGER, shared_memory INTEGER, occupancy REAL, bytes INTEGER,
  input_dims TEXT, input_types TEXT,
  parent INTEGER, args TEXT, launch INTEGER);
CREATE TABLE marks (trace INTEGER NOT NULL, ph TEXT NOT NULL, ts INTEGER, pid INTEGER, tid INTEGER, event TEXT NOT NULL);
CREATE VIEW kernels AS
  SELECT e.*, s.value AS name_text FROM events e JOIN strings s ON s.id = e.name WHERE e.kind = 'kernel';
)SQL";
// A device task with the runtime/driver call that launched it and that call's CPU op.
constexpr std::string_view kKernelLaunchesView = R"SQL(
CREATE VIEW kernel_launches AS
  SELECT k.trace, k.rowid AS kernel, k.launch AS launch, r.parent AS cpu_op
  FROM events k LEFT JOIN events r ON r.rowid = k.launch
  WHERE k.kind IN ('kernel', 'gpu_memcpy', 'gpu_memset');
)SQL";
// The store has no index. A device task's launch (the runtime/driver call of its trace with the
// same correlation id) is linked as the events are written (TraceWriter::AddEvent, the `launch`
// column), so the kernel_launches view joins by rowid. Up to schema 2 two indexes were built
// after each trace instead — events_kind (trace, kind, ts) and events_launch (trace, correlation)
// — over every trace in the store, so a folder of traces cost more per trace the more it held;
// events_kind's build (2 M sort keys all starting with the same trace) was a third of a large
// trace's import and no reader was faster with it: they scan the events once (docs/prof.md,
// "Store"). The Ascend join builds the index on time it needs and drops it. Schema 1's
// events_external and events_correlation are gone too (the 2 → 3 migration drops every old
// index): launches are linked to their ops as the events are written, and no reader looks events
// up by External id.
// Schema 1 → 2: args and marks (traces imported before have `marks` NULL: no detail).
constexpr std::string_view kMigrate1To2 = R"SQL(
ALTER TABLE events ADD COLUMN args TEXT;
ALTER TABLE traces ADD COLUMN marks INTEGER;
CREATE TABLE marks (trace INTEGER NOT NULL, ph TEXT NOT NULL, ts INTEGER, pid INTEGER, tid INTEGER, event TEXT NOT NULL);
)SQL";

// Links every device task to its launch from the correlation ids, through an index built for it
// (the 2 → 3 migration; a trace re-kinded after its events were written), then drops the index;
// the caller appends a condition on the tasks (or nothing) and ";".
constexpr std::string_view kRelinkLaunches =
    "CREATE INDEX IF NOT EXISTS events_relink ON events (correlation, trace) WHERE kind IN ('runtime', 'driver'); "
    "UPDATE events SET launch = (SELECT MIN(r.rowid) FROM events r WHERE r.correlation = events.correlation "
    "AND r.trace = events.trace AND r.kind IN ('runtime', 'driver')) "
    "WHERE kind IN ('kernel', 'gpu_memcpy', 'gpu_memset') AND correlation IS NOT NULL";
// Schema 2 → 3: the launch link stored (the view joined on correlation through events_launch),
// every index of schemas 1 and 2 dropped (a store of schema 1 passes here too); then
// kRelinkLaunches and the view (StoreSchema).
constexpr std::string_view kMigrate2To3 = R"SQL(
ALTER TABLE events ADD COLUMN launch INTEGER;
DROP INDEX IF EXISTS events_kind;
DROP INDEX IF EXISTS events_launch;
DROP INDEX IF EXISTS events_correlation;
DROP INDEX IF EXISTS events_external;
DROP VIEW IF EXISTS kernel_launches;
)SQL";

// Schema 3 → 4: the trace's clock (Kineto's baseTimeNanoseconds), so that `export timeline` puts
// the traces of several ranks on absolute time; traces imported before have it NULL (their own
// clock, as before) until imported again.
constexpr std::string_view kMigrate3To4 = "ALTER TABLE traces ADD COLUMN base_ns INTEGER;";

sql::Schema StoreSchema() {
  sql::Schema s;
  s.what = "profile store";
  s.version = kStoreSchemaVersion;
  // Constant texts, composed once: the view is created by both.
  static const std::string create = std::string(kCreateSchema) + std::string(kKernelLaunchesView);
  static const std::string to3 = std::string(kMigrate2To3) + std::string(kRelinkLaunches) +
                                 "; DROP INDEX events_relink;" + std::string(kKernelLaunchesView);
  s.create_sql = create;
  s.migrations = {kMigrate1To2, to3, kMigrate3To4};
  s.remedy = "delete it and run `portkit prof import` on the traces again";
  return s;
}

/// How long a writer waits for another one (a trace's transaction, or the build of a new store).
constexpr int kWaitForWriterMs = 3'600'000;
/// `<store>.new-<pid>`: a new store while it is built (its name starts with the store's, so the
/// importers never take it for a trace).
constexpr std::string_view kUnpublishedInfix = ".new-";

/// The exclusive lock on `dir`, waited for up to kWaitForWriterMs; fd < 0 when the folder cannot
/// be opened or locked.
FolderLock LockFolder(const fs::path& dir) {
  FolderLock lock(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (lock.fd < 0) return lock;
  for (int waited = 0;; waited += 20) {
    if (flock(lock.fd, LOCK_EX | LOCK_NB) == 0) return lock;
    if (errno != EWOULDBLOCK && errno != EINTR) break;
    if (waited >= kWaitForWriterMs) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return FolderLock();
}

/// Removes `db` and SQLite's files beside it (-wal, -shm, -journal).
void RemoveSqliteFiles(const fs::path& db) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(db.string() + suffix, ec);
}

/// Removes the temporary files of new stores at `path` that killed writers left (called under the
/// folder's lock: no live writer has one).
void RemoveUnpublished(const fs::path& path) {
  const std::string prefix = path.filename().string() + std::string(kUnpublishedInfix);
  std::error_code ec;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(path.parent_path().empty() ? fs::path(".") : path.parent_path(), ec), end;
       !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) == 0) stale.push_back(it->path());
  }
  for (const auto& p : stale) fs::remove(p, ec);
}

/// fsync of the file or folder at `p`.
Status SyncPath(const fs::path& p, bool folder) {
  int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC | (folder ? O_DIRECTORY : 0));
  if (fd < 0 || fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) close(fd);
    return Status(ErrorCode::kIo, p.string() + " cannot be written (" + std::strerror(err) + ")");
  }
  close(fd);
  return Status::Ok();
}

Expected<std::unique_ptr<sql::Statement>> PrepareOwned(sql::Database& db, std::string_view text) {
  auto st = db.Prepare(text);
  if (!st.ok()) return st.status();
  return std::make_unique<sql::Statement>(std::move(*st));
}

}  // namespace

namespace {

// The bounds of the importers (TimesInRange), as SQL over a row of `events` / `marks`: a value
// that is not an integer (text, a real, NULL) is out of range too.
std::string EventInRangeSql() {
  const std::string ts = std::to_string(kMaxTimestampNs), dur = std::to_string(kMaxDurationNs);
  return "(typeof(ts) = 'integer' AND typeof(dur) = 'integer' AND ts BETWEEN -" + ts + " AND " + ts +
         " AND dur BETWEEN 0 AND " + dur + ")";
}
std::string MarkInRangeSql() {
  const std::string ts = std::to_string(kMaxTimestampNs);
  return "(ts IS NULL OR (typeof(ts) = 'integer' AND ts BETWEEN -" + ts + " AND " + ts + "))";
}

// Rows out of range are counted, and when there are any, every query of this connection sees only
// the others: TEMP views named like the tables come first in SQLite's name lookup (TEMP before
// MAIN), and kernel_launches is made again over the filtered events. A store portkit wrote has no
// such row, and its queries run on the tables as before.
Status HideRowsOutOfRange(sql::Database& db, StoreReadNotes* notes) {
  auto q = db.Prepare("SELECT (SELECT count(*) FROM main.events WHERE NOT " + EventInRangeSql() +
                      "), (SELECT count(*) FROM main.marks WHERE NOT " + MarkInRangeSql() + ")");
  if (!q.ok()) return q.status();
  auto row = q->Step();
  if (!row.ok()) return row.status();
  StoreReadNotes found;
  if (*row) found = {q->Int(0), q->Int(1)};
  if (notes) *notes = found;
  if (found.events_left_out == 0 && found.marks_left_out == 0) return Status::Ok();
  return db.Exec(
      "CREATE TEMP VIEW events AS SELECT rowid AS rowid, trace, kind, name, category, ts, dur, pid, tid, correlation, "
      "external_id, grid_x, grid_y, grid_z, block_x, block_y, block_z, registers, shared_memory, occupancy, bytes, "
      "input_dims, input_types, parent, args, launch FROM main.events WHERE " +
      EventInRangeSql() +
      ";"
      "CREATE TEMP VIEW marks AS SELECT rowid AS rowid, trace, ph, ts, pid, tid, event FROM main.marks WHERE " +
      MarkInRangeSql() +
      ";"
      "CREATE TEMP VIEW kernels AS SELECT e.*, s.value AS name_text FROM temp.events e JOIN main.strings s "
      "ON s.id = e.name WHERE e.kind = 'kernel';"
      "CREATE TEMP VIEW kernel_launches AS SELECT k.trace, k.rowid AS kernel, k.launch AS launch, r.parent AS cpu_op "
      "FROM temp.events k LEFT JOIN temp.events r ON r.rowid = k.launch "
      "WHERE k.kind IN ('kernel', 'gpu_memcpy', 'gpu_memset');");
}

bool IsPermissionProblem(const Status& st) {
  return st.code() == ErrorCode::kIo && (st.message().find("cannot be opened") != std::string::npos ||
                                         st.message().find("cannot be written") != std::string::npos);
}

}  // namespace

std::string StoreReadNotes::Warning(const std::string& db_path) const {
  if (events_left_out == 0 && marks_left_out == 0) return "";
  std::string what;
  if (events_left_out) what = std::to_string(events_left_out) + " events";
  if (marks_left_out) what += (what.empty() ? "" : " and ") + std::to_string(marks_left_out) + " marks";
  return db_path + ": " + what +
         " left out: a timestamp or duration out of range (durations 0 to 1e14 ns, "
         "timestamps up to 4e18 ns; `prof import` never stores such rows: was the store edited?)";
}

Expected<sql::Database> OpenStoreForReading(const fs::path& db_path, StoreReadNotes* notes,
                                            const StoreReadOptions& read) {
  std::error_code ec;
  if (!fs::exists(db_path, ec))
    return NotFound(db_path.string() + " does not exist; run `portkit prof import -dir " +
                    db_path.parent_path().string() + "` first");
  if (auto probe = OpenInputFile(db_path); !probe.ok()) return probe.status();
  sql::OpenOptions options;
  options.read_only = true;
  options.max_value_bytes = read.max_value_bytes;
  options.limit_remedy = read.limit_remedy;
  // Readers never write, so no trigger could fire; they are off all the same. The store's own two
  // views are used by the readers and checked to be exactly portkit's (EnsureSchema).
  options.run_stored_triggers = false;
  auto open = [&]() -> Expected<sql::Database> {
    auto db = sql::Database::Open(db_path, options);
    if (db.ok() || !IsPermissionProblem(db.status())) return db;
    // A folder this process cannot write (a read-only mount, another user's folder): SQLite cannot
    // make the -shm file a WAL store needs. With nothing in the write-ahead log the file alone is
    // the whole store, and it is read as an immutable file; otherwise the first answer stands.
    fs::path wal = db_path.string() + "-wal";
    std::error_code size_ec;
    if (fs::exists(wal, size_ec) && fs::file_size(wal, size_ec) > 0) return db;
    sql::OpenOptions frozen = options;
    frozen.immutable = true;
    auto again = sql::Database::Open(db_path, frozen);
    return again.ok() ? std::move(again) : std::move(db);
  };
  auto db = open();
  if (!db.ok()) return db.status();
  Status st = sql::EnsureSchema(*db, StoreSchema());
  if (st.ok()) {
    PORTKIT_RETURN_IF_ERROR(HideRowsOutOfRange(*db, notes));
    return db;
  }
  // An older schema is migrated when the store can be written (opening it for writing does);
  // otherwise, or for a store that cannot be migrated, the first answer stands.
  auto version = db->UserVersion();
  if (st.code() != ErrorCode::kUnsupported || !version.ok() || *version <= 0 || *version >= kStoreSchemaVersion ||
      access(db_path.c_str(), W_OK) != 0)
    return st;
  {
    auto writable = Store::Open(db_path);
    if (!writable.ok()) return st;
  }
  auto again = open();
  if (!again.ok()) return again.status();
  PORTKIT_RETURN_IF_ERROR(sql::EnsureSchema(*again, StoreSchema()));
  PORTKIT_RETURN_IF_ERROR(HideRowsOutOfRange(*again, notes));
  return again;
}

Expected<Store> Store::OpenFile(const fs::path& path, bool fresh) {
  sql::OpenOptions options;
  // Two imports into one store: the second waits for the first's trace transaction (one trace at a
  // time), however long a large trace takes to import.
  options.busy_timeout_ms = kWaitForWriterMs;
  // 64 KiB pages (set before WAL, which fixes the page size of a new store): a bulk import
  // writes a quarter as many WAL frames and B-tree pages as with 4 KiB ones.
  options.page_size = 65536;
  options.wal = path != ":memory:" && !fresh;
  // Triggers never run on the store's writes (EnsureSchema refuses a store holding one, too).
  options.run_stored_triggers = false;
  auto db = sql::Database::Open(path, options);
  if (!db.ok()) return db.status();
  // 4 MiB of page cache (64 pages): an import appends to the end of each table, so a few pages
  // serve it; with 16 MiB (and larger batches) the import took no less CPU in alternated runs on
  // the real traces, and the cache was a third of its peak RSS (docs/benchmarks.md,
  // prof_import_bench). Two helper threads
  // for SQLite's sorter, for the sorts at the end of a trace (the nesting pass of calls without
  // External ids, the Ascend join's index), on the core the parse has left idle by then.
  PORTKIT_RETURN_IF_ERROR(db->Exec("PRAGMA cache_size = -4096; PRAGMA synchronous = NORMAL; PRAGMA threads = 2;"));
  // Checkpoints are run by TraceWriter::Finish (one per trace, on another thread) and by
  // the last connection's close, not by SQLite after every commit.
  if (options.wal) PORTKIT_RETURN_IF_ERROR(db->Exec("PRAGMA wal_autocheckpoint = 0;"));
  // A new store's temporary file: nobody else opens it and a crash leaves only a file that is
  // removed, so no journal on disk (a rollback still works: the journal is in memory; a new
  // store's pages need none) and no fsync until Publish. Each page is written once, not to the
  // WAL and then again by the checkpoint.
  if (fresh) PORTKIT_RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF;"));
  PORTKIT_RETURN_IF_ERROR(sql::EnsureSchema(*db, StoreSchema()));
  Store s;
  s.db_ = std::make_unique<sql::Database>(std::move(*db));
  auto mark = PrepareOwned(*s.db_, "INSERT INTO marks VALUES (?,?,?,?,?,?)");
  if (!mark.ok()) return mark.status();
  s.insert_mark_ = std::move(*mark);
  std::string many = std::string(kInsertRows) + "INTO marks VALUES (?,?,?,?,?,?)";
  for (size_t i = 1; i < kMarksPerInsert; ++i) many += ",(?,?,?,?,?,?)";
  auto marks = PrepareOwned(*s.db_, many);
  if (!marks.ok()) return marks.status();
  s.insert_marks_ = std::move(*marks);
  auto ins = PrepareOwned(*s.db_, "INSERT INTO strings (value) VALUES (?)");
  if (!ins.ok()) return ins.status();
  auto find = PrepareOwned(*s.db_, "SELECT id FROM strings WHERE value = ?");
  if (!find.ok()) return find.status();
  s.insert_string_ = std::move(*ins);
  s.find_string_ = std::move(*find);
  return s;
}

Expected<Store> Store::Open(const fs::path& path) {
  std::error_code ec;
  if (path == ":memory:" || fs::exists(path, ec)) return OpenFile(path, false);
  // A new store: built in a temporary file beside it, under the folder's lock (a second writer
  // waits for the rename, then opens the store as an existing one). Where the folder cannot be
  // locked, or the store appeared meanwhile, it is opened in place as an existing store is.
  FolderLock lock = LockFolder(path.parent_path().empty() ? fs::path(".") : path.parent_path());
  if (lock.fd < 0 || fs::exists(path, ec)) return OpenFile(path, false);
  RemoveUnpublished(path);
  const fs::path temp = path.string() + std::string(kUnpublishedInfix) + std::to_string(getpid());
  auto s = OpenFile(temp, true);
  if (!s.ok()) {
    // Opened in place instead: a folder that cannot be written is then refused as before, with
    // the store's name.
    RemoveSqliteFiles(temp);
    return OpenFile(path, false);
  }
  s->publish_to_ = path.string();
  s->folder_lock_ = std::move(lock);
  return s;
}

FolderLock& FolderLock::operator=(FolderLock&& o) noexcept {
  if (this != &o) {
    if (fd >= 0) close(fd);
    fd = std::exchange(o.fd, -1);
  }
  return *this;
}

FolderLock::~FolderLock() {
  if (fd >= 0) close(fd);
}

Store::~Store() {
  WaitForCheckpoint();
  if (db_ && !publish_to_.empty()) (void)Publish();
}

const std::string& Store::path() const { return publish_to_.empty() ? db_->path() : publish_to_; }

Status Store::AfterCommit() {
  if (publish_to_.empty()) {
    StartCheckpoint();
    return Status::Ok();
  }
  return Publish();
}

namespace {
/// Renames `from` to `to` unless `to` exists (the file systems without renameat2's NOREPLACE: a
/// hard link, then the old name removed).
Status RenameNoReplace(const fs::path& from, const fs::path& to) {
  int rc = renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
    rc = link(from.c_str(), to.c_str());
    if (rc == 0) unlink(from.c_str());
  }
  if (rc == 0) return Status::Ok();
  if (errno == EEXIST)
    return Status(ErrorCode::kIo, to.string() +
                                      " was created by another program while this import built it; "
                                      "the trace was not imported: run the import again");
  return Status(ErrorCode::kIo, to.string() + " cannot be written (" + std::strerror(errno) + ")");
}
}  // namespace

Status Store::Publish() {
  if (publish_to_.empty() || !db_) return Status::Ok();
  const fs::path temp = db_->path(), path = publish_to_;
  publish_to_.clear();
  // Released on return: a writer waiting for the folder then finds the store in place.
  FolderLock lock = std::move(folder_lock_);
  // The statements go before their connection. The file becomes a WAL store, as an existing one
  // is; closing the last connection removes its (empty) WAL.
  insert_event_.clear();
  insert_events_.clear();
  insert_mark_.reset(), insert_marks_.reset(), insert_string_.reset(), find_string_.reset();
  Status st = db_->Exec("PRAGMA journal_mode = WAL");
  db_.reset();
  if (st.ok()) st = SyncPath(temp, false);
  if (st.ok()) {
    // A -wal or -shm left without its store would be read as this store's.
    std::error_code ec;
    for (const char* suffix : {"-wal", "-shm"}) fs::remove(path.string() + suffix, ec);
    st = RenameNoReplace(temp, path);
  }
  if (st.ok()) st = SyncPath(path.parent_path().empty() ? fs::path(".") : path.parent_path(), true);
  if (!st.ok()) {
    RemoveSqliteFiles(temp);
    OnRollback();  // the string ids were the temporary file's
  }
  // From here on the store is an existing one (when it could not be renamed, the file another
  // program made there, if any).
  // Where nothing can be opened, an empty store in memory stands in (no caller is left without a
  // connection) and the error is the answer.
  Status reopen_error;
  auto again = [&]() -> Expected<Store> {
    auto there = OpenFile(path, false);
    if (there.ok()) return there;
    reopen_error = there.status();
    return OpenFile(":memory:", false);
  }();
  if (!again.ok()) return st.ok() ? again.status() : st;
  if (st.ok() && !reopen_error.ok()) st = reopen_error;
  db_ = std::move(again->db_);
  insert_mark_ = std::move(again->insert_mark_), insert_marks_ = std::move(again->insert_marks_);
  insert_string_ = std::move(again->insert_string_), find_string_ = std::move(again->find_string_);
  return st;
}

Expected<Store> Store::OpenForReading(const fs::path& path, const StoreReadOptions& options) {
  StoreReadNotes notes;
  auto db = OpenStoreForReading(path, &notes, options);
  if (!db.ok()) return db.status();
  Store s;
  s.read_notes_ = notes;
  s.db_ = std::make_unique<sql::Database>(std::move(*db));
  return s;
}

Expected<int64_t> Store::Intern(std::string_view s) {
  if (auto it = strings_.find(s); it != strings_.end()) return it->second;
  std::string key(s);
  // Not known in this run: the store may hold it from an earlier import.
  find_string_->Bind(1, key);
  auto row = find_string_->Step();
  if (!row.ok()) {
    find_string_->Reset();
    return row.status();
  }
  int64_t id;
  if (*row) {
    id = find_string_->Int(0);
    find_string_->Reset();
  } else {
    find_string_->Reset();
    PORTKIT_RETURN_IF_ERROR(insert_string_->Bind(1, key).Run());
    id = db_->LastInsertRowId();
  }
  strings_.emplace(std::move(key), id);
  return id;
}

namespace {
// The columns of events every row has, then the optional ones (NULL when absent), in the order
// AddEvent binds them.
constexpr std::string_view kEventColumns = "trace, kind, name, category, ts, dur, pid, tid";
constexpr std::string_view kEventOptionalColumns[] = {
    "correlation",   "external_id", "grid_x", "grid_y",     "grid_z",      "block_x", "block_y", "block_z", "registers",
    "shared_memory", "occupancy",   "bytes",  "input_dims", "input_types", "parent",  "args",    "launch"};
constexpr int kEventFixedColumns = 8;
constexpr uint32_t kAllOptionalColumns = (1u << std::size(kEventOptionalColumns)) - 1;
constexpr size_t kMaxInsertStatements = 64;
/// Events inserted per statement by TraceWriter::AddEvents (at most 25 parameters each).
constexpr size_t kEventsPerInsert = 16;
}  // namespace

namespace {
// INSERT INTO events naming the fixed columns and the optional ones of `columns`, `rows` rows.
std::string InsertEventsSql(uint32_t columns, size_t rows) {
  std::string text = std::string(kInsertRows) + "INTO events (" + std::string(kEventColumns);
  std::string values = "(?";
  for (int i = 1; i < kEventFixedColumns; ++i) values += ",?";
  for (size_t i = 0; i < std::size(kEventOptionalColumns); ++i) {
    if (!(columns & (1u << i))) continue;
    text += ", " + std::string(kEventOptionalColumns[i]);
    values += ",?";
  }
  values += ")";
  text += ") VALUES " + values;
  for (size_t r = 1; r < rows; ++r) text += "," + values;
  return text;
}
}  // namespace

Expected<sql::Statement*> Store::InsertEventStatement(uint32_t* columns) {
  auto it = insert_event_.find(*columns);
  if (it != insert_event_.end()) return it->second.get();
  // A trace whose events come with ever other sets of columns ends up on the statement naming
  // them all (absent ones bound NULL): the cache stays small whatever the input.
  if (insert_event_.size() >= kMaxInsertStatements) *columns = kAllOptionalColumns;
  auto& slot = insert_event_[*columns];
  if (slot) return slot.get();
  auto st = PrepareOwned(*db_, InsertEventsSql(*columns, 1));
  if (!st.ok()) {
    insert_event_.erase(*columns);
    return st.status();
  }
  slot = std::move(*st);
  return slot.get();
}

Expected<sql::Statement*> Store::InsertEventsStatement(uint32_t columns) {
  auto it = insert_events_.find(columns);
  if (it != insert_events_.end()) return it->second.get();
  if (insert_events_.size() >= kMaxInsertStatements) return nullptr;
  auto st = PrepareOwned(*db_, InsertEventsSql(columns, kEventsPerInsert));
  if (!st.ok()) return st.status();
  return (insert_events_[columns] = std::move(*st)).get();
}

Expected<TraceWriter> Store::BeginTrace(std::string_view path, std::string_view format) {
  if (!insert_mark_) return Status(ErrorCode::kInternal, db_->path() + ": the store was opened read-only");
  auto tx = std::make_unique<sql::Transaction>(*db_);
  PORTKIT_RETURN_IF_ERROR(tx->status());
  // From here on, a return without a TraceWriter rolls back through `tx`; string ids learnt
  // meanwhile would then name rows that no longer exist.
  auto fail = [&](Status st) {
    tx->Rollback();
    OnRollback();
    return st;
  };
  // Re-import replaces the earlier import of the same file.
  auto old = db_->Prepare("SELECT id FROM traces WHERE path = ?");
  if (!old.ok()) return fail(old.status());
  old->Bind(1, path);
  auto row = old->Step();
  if (!row.ok()) return fail(row.status());
  if (*row) {
    std::string t = std::to_string(old->Int(0));
    if (Status st = db_->Exec("DELETE FROM events WHERE trace = " + t + "; DELETE FROM devices WHERE trace = " + t +
                              "; DELETE FROM marks WHERE trace = " + t + "; DELETE FROM traces WHERE id = " + t + ";");
        !st.ok())
      return fail(st);
  }
  auto insert = db_->Prepare("INSERT INTO traces (path, format) VALUES (?, ?)");
  if (!insert.ok()) return fail(insert.status());
  if (Status st = insert->Bind(1, path).Bind(2, format).Run(); !st.ok()) return fail(st);
  return TraceWriter(this, std::move(tx), db_->LastInsertRowId());
}

Expected<std::vector<std::string>> Store::TracePaths() {
  auto q = db_->Prepare("SELECT path FROM traces ORDER BY path");
  if (!q.ok()) return q.status();
  std::vector<std::string> out;
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    out.emplace_back(q->Text(0));
  }
  return out;
}

Status Store::DropTraces(const std::vector<std::string>& paths) {
  if (paths.empty()) return Status::Ok();
  sql::Transaction tx(*db_);
  PORTKIT_RETURN_IF_ERROR(tx.status());
  for (const auto& path : paths) {
    auto q = db_->Prepare("SELECT id FROM traces WHERE path = ?");
    if (!q.ok()) return q.status();
    q->Bind(1, path);
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) continue;
    std::string t = std::to_string(q->Int(0));
    PORTKIT_RETURN_IF_ERROR(
        db_->Exec("DELETE FROM events WHERE trace = " + t + "; DELETE FROM devices WHERE trace = " + t +
                  "; DELETE FROM marks WHERE trace = " + t + "; DELETE FROM traces WHERE id = " + t + ";"));
  }
  return tx.Commit();
}

TraceWriter::TraceWriter(TraceWriter&& o) noexcept
    : store_(o.store_),
      tx_(std::move(o.tx_)),
      id_(o.id_),
      marks_(o.marks_),
      op_by_external_(std::move(o.op_by_external_)),
      unlinked_(std::move(o.unlinked_)),
      needs_enclosing_(o.needs_enclosing_),
      call_by_correlation_(std::move(o.call_by_correlation_)),
      unlaunched_(std::move(o.unlaunched_)),
      relink_launches_(o.relink_launches_),
      id_of_key_(std::move(o.id_of_key_)),
      events_(o.events_),
      next_rowid_(o.next_rowid_),
      base_ns_(o.base_ns_),
      start_pages_(o.start_pages_) {}

TraceWriter::~TraceWriter() { Abort(); }

void TraceWriter::Abort() {
  if (!tx_) return;
  tx_->Rollback();
  tx_.reset();
  store_->OnRollback();
}

Expected<int64_t> TraceWriter::StringId(int32_t key, std::string_view text) {
  if (key < 0) return store_->Intern(text);
  const auto k = static_cast<size_t>(key);
  if (k < id_of_key_.size() && id_of_key_[k] >= 0) return id_of_key_[k];
  auto id = store_->Intern(text);
  if (!id.ok()) return id;
  if (k >= id_of_key_.size()) id_of_key_.resize(std::max(k + 1, 2 * id_of_key_.size()), -1);
  id_of_key_[k] = *id;
  return id;
}

Expected<std::pair<int64_t, int64_t>> Store::Pages() {
  int64_t v[2] = {0, 0};
  const char* pragmas[] = {"PRAGMA page_count", "PRAGMA page_size"};
  for (int i = 0; i < 2; ++i) {
    auto q = db_->Prepare(pragmas[i]);
    if (!q.ok()) return q.status();
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (*row) v[i] = q->Int(0);
  }
  return std::pair{v[0], v[1]};
}

Status TraceWriter::CheckLimits() {
  const std::string& db = store_->path();
  if (store_->max_events_ > 0 && events_ >= store_->max_events_)
    return InvalidArgument(db + ": over the limit: more than " + std::to_string(store_->max_events_) +
                           " events in one trace; not imported. --max-events raises the limit");
  if (store_->max_growth_bytes_ == 0 || events_ % kGrowthCheckEvents != 0) return Status::Ok();
  auto pages = store_->Pages();
  if (!pages.ok()) return pages.status();
  if (start_pages_ < 0) start_pages_ = pages->first;
  const auto grown =
      static_cast<uint64_t>(std::max<int64_t>(0, pages->first - start_pages_)) * static_cast<uint64_t>(pages->second);
  if (grown > store_->max_growth_bytes_)
    return InvalidArgument(db + ": over the limit: one trace grew the store by more than " +
                           std::to_string(store_->max_growth_bytes_ >> 20) + " MiB (" + std::to_string(events_) +
                           " events); not imported. --max-store-growth-mb raises the limit");
  return Status::Ok();
}

namespace {
/// The integer optional columns of an event, in kEventOptionalColumns' order (absent ones < 0).
std::array<int64_t, 10> OptionalInts(const Event& e) {
  return {e.correlation, e.external_id, e.grid[0],  e.grid[1],   e.grid[2],
          e.block[0],    e.block[1],    e.block[2], e.registers, e.shared_memory};
}
static_assert(std::tuple_size_v<std::array<int64_t, 10>> + 7 == std::size(kEventOptionalColumns));

constexpr uint32_t kOccupancy = 1u << 10, kBytes = 1u << 11, kDims = 1u << 12, kTypes = 1u << 13, kParent = 1u << 14,
                   kArgs = 1u << 15, kLaunch = 1u << 16;
}  // namespace

Status TraceWriter::PrepareRow(const Event& e, Row* row) {
  PORTKIT_RETURN_IF_ERROR(CheckLimits());
  ++events_;
  auto name = StringId(e.name_key, e.name);
  if (!name.ok()) return name.status();
  auto cat = StringId(e.category_key, e.category);
  if (!cat.ok()) return cat.status();
  row->name = *name;
  row->category = *cat;
  // The CPU op a launch belongs to (its External id), when that op has come already; the call
  // that launched a device task (its correlation id), when that call has come already.
  const bool call = e.kind == EventKind::kRuntime || e.kind == EventKind::kDriver;
  const bool device = IsDeviceTask(e.kind);
  row->parent = row->launch = -1;
  if (call && e.external_id >= 0) {
    if (auto it = op_by_external_.find(e.external_id); it != op_by_external_.end()) row->parent = it->second;
  }
  if (device && e.correlation >= 0) {
    if (auto it = call_by_correlation_.find(e.correlation); it != call_by_correlation_.end()) row->launch = it->second;
  }
  // The optional columns in kEventOptionalColumns' order; absent ones (< 0, empty) stay NULL.
  const auto ints = OptionalInts(e);
  uint32_t present = 0;
  for (size_t k = 0; k < std::size(ints); ++k)
    if (ints[k] >= 0) present |= 1u << k;
  if (e.occupancy >= 0) present |= kOccupancy;
  if (e.bytes >= 0) present |= kBytes;
  if (!e.input_dims.empty()) present |= kDims;
  if (!e.input_types.empty()) present |= kTypes;
  if (row->parent >= 0) present |= kParent;
  if (!e.args.empty()) present |= kArgs;
  if (row->launch >= 0) present |= kLaunch;
  row->present = present;
  return Status::Ok();
}

void TraceWriter::Remember(const Event& e, const Row& row, int64_t rowid) {
  const bool call = e.kind == EventKind::kRuntime || e.kind == EventKind::kDriver;
  if (e.kind == EventKind::kCpuOp && e.external_id >= 0) op_by_external_.try_emplace(e.external_id, rowid);
  if (call && row.parent < 0) {
    if (e.external_id >= 0) unlinked_.emplace_back(rowid, e.external_id);
    else needs_enclosing_ = true;
  }
  // The first call of a correlation id launched its tasks (a graph launch has several).
  if (call && e.correlation >= 0) call_by_correlation_.try_emplace(e.correlation, rowid);
  if (IsDeviceTask(e.kind) && e.correlation >= 0 && row.launch < 0) unlaunched_.emplace_back(rowid, e.correlation);
  next_rowid_ = rowid + 1;
}

void TraceWriter::BindRow(sql::Statement& s, int* at, int64_t trace, uint32_t columns, const Event& e, const Row& row) {
  // Texts are bound without a copy: the event's views stay valid until the row is written, and
  // every parameter is bound again before the statement's next run.
  int i = *at;
  s.Bind(i++, trace);
  s.BindStatic(i++, std::string_view(EventKindName(e.kind)));
  s.Bind(i++, row.name);
  s.Bind(i++, row.category);
  s.Bind(i++, e.ts_ns);
  s.Bind(i++, e.dur_ns);
  s.Bind(i++, e.pid);
  s.Bind(i++, e.tid);
  const auto ints = OptionalInts(e);
  // `columns` names the statement's optional columns: those of `present`, or more.
  auto value = [&](uint32_t bit, auto bind) {
    if (!(columns & bit)) return;
    if (row.present & bit) bind();
    else s.BindNull(i);
    ++i;
  };
  for (size_t k = 0; k < std::size(ints); ++k) value(1u << k, [&] { s.Bind(i, ints[k]); });
  value(kOccupancy, [&] { s.Bind(i, e.occupancy); });
  value(kBytes, [&] { s.Bind(i, e.bytes); });
  value(kDims, [&] { s.BindStatic(i, e.input_dims); });
  value(kTypes, [&] { s.BindStatic(i, e.input_types); });
  value(kParent, [&] { s.Bind(i, row.parent); });
  value(kArgs, [&] { s.BindStatic(i, e.args); });
  value(kLaunch, [&] { s.Bind(i, row.launch); });
  *at = i;
}

Status TraceWriter::AddEvent(const Event& e) {
  Row row;
  PORTKIT_RETURN_IF_ERROR(PrepareRow(e, &row));
  uint32_t columns = row.present;
  auto statement = store_->InsertEventStatement(&columns);
  if (!statement.ok()) return statement.status();
  int i = 1;
  BindRow(**statement, &i, id_, columns, e, row);
  PORTKIT_RETURN_IF_ERROR((*statement)->RunKeepingBindings());
  Remember(e, row, store_->db_->LastInsertRowId());
  return Status::Ok();
}

Status TraceWriter::AddEvents(std::span<const Event> events) {
  size_t done = 0;
  std::array<Row, kEventsPerInsert> rows;
  while (done < events.size()) {
    // A run of kEventsPerInsert events goes in one INSERT naming the columns any of them has
    // (each row's others bound NULL), once the rowid of the next event is known (after one
    // event of the trace): the links made within the run name rowids given in order.
    if (next_rowid_ < 0 || events.size() - done < kEventsPerInsert) {
      PORTKIT_RETURN_IF_ERROR(AddEvent(events[done++]));
      continue;
    }
    const int64_t first = next_rowid_;
    uint32_t columns = 0;
    for (size_t r = 0; r < kEventsPerInsert; ++r) {
      PORTKIT_RETURN_IF_ERROR(PrepareRow(events[done + r], &rows[r]));
      Remember(events[done + r], rows[r], first + static_cast<int64_t>(r));
      columns |= rows[r].present;
    }
    auto statement = store_->InsertEventsStatement(columns);
    if (!statement.ok()) return statement.status();
    int i = 1;
    for (size_t r = 0; r < kEventsPerInsert; ++r) {
      if (*statement) {
        BindRow(**statement, &i, id_, columns, events[done + r], rows[r]);
        continue;
      }
      // No statement for this set of columns (its cache is full): row by row, rows worked out.
      uint32_t one = rows[r].present;
      auto single = store_->InsertEventStatement(&one);
      if (!single.ok()) return single.status();
      int k = 1;
      BindRow(**single, &k, id_, one, events[done + r], rows[r]);
      PORTKIT_RETURN_IF_ERROR((*single)->RunKeepingBindings());
    }
    if (*statement) PORTKIT_RETURN_IF_ERROR((*statement)->RunKeepingBindings());
    if (store_->db_->LastInsertRowId() != next_rowid_ - 1)
      return Status(ErrorCode::kInternal, store_->path() + ": events stored at unexpected rowids");
    done += kEventsPerInsert;
  }
  return Status::Ok();
}

Status TraceWriter::AddMark(const Mark& m) {
  sql::Statement& s = *store_->insert_mark_;
  // Every parameter is bound on each run; the texts live until the row is written.
  s.Bind(1, id_).BindStatic(2, m.ph);
  if (m.has_ts) s.Bind(3, m.ts_ns);
  else s.BindNull(3);
  s.Bind(4, m.pid).Bind(5, m.tid).BindStatic(6, m.json);
  ++marks_;
  return s.RunKeepingBindings();
}

Status TraceWriter::AddMarks(std::span<const Mark> marks) {
  sql::Statement& s = *store_->insert_marks_;
  size_t done = 0;
  for (; done + kMarksPerInsert <= marks.size(); done += kMarksPerInsert) {
    int i = 1;
    for (const Mark& m : marks.subspan(done, kMarksPerInsert)) {
      s.Bind(i, id_).BindStatic(i + 1, m.ph);
      if (m.has_ts) s.Bind(i + 2, m.ts_ns);
      else s.BindNull(i + 2);
      s.Bind(i + 3, m.pid).Bind(i + 4, m.tid).BindStatic(i + 5, m.json);
      i += 6;
    }
    marks_ += static_cast<int64_t>(kMarksPerInsert);
    PORTKIT_RETURN_IF_ERROR(s.RunKeepingBindings());
  }
  for (; done < marks.size(); ++done) PORTKIT_RETURN_IF_ERROR(AddMark(marks[done]));
  return Status::Ok();
}

Status TraceWriter::AddDevice(int64_t id, std::string_view name, std::string_view properties) {
  auto q = store_->db_->Prepare("INSERT INTO devices VALUES (?, ?, ?, ?)");
  if (!q.ok()) return q.status();
  return q->Bind(1, id_).Bind(2, id).Bind(3, name).Bind(4, properties).Run();
}

// A runtime/driver call belongs to the CPU op with its External id (linked as the events came in,
// or here when the op came after the call); traces that do not carry that id (HTA's CUDA samples)
// get the innermost CPU op enclosing the call on its thread.
Status TraceWriter::LinkByExternalId() {
  auto upd = store_->db_->Prepare("UPDATE events SET parent = ? WHERE rowid = ?");
  if (!upd.ok()) return upd.status();
  for (const auto& [rowid, external] : unlinked_) {
    auto it = op_by_external_.find(external);
    if (it == op_by_external_.end()) {
      needs_enclosing_ = true;
      continue;
    }
    PORTKIT_RETURN_IF_ERROR(upd->Bind(1, it->second).Bind(2, rowid).Run());
  }
  unlinked_.clear();
  op_by_external_.clear();
  return Status::Ok();
}

// Device tasks that came before their call, linked now; a trace whose kinds changed after the
// events were written (SetKindOfProcess) is linked again as a whole, through an index built for it.
Status TraceWriter::LinkLaunches() {
  sql::Database& db = *store_->db_;
  if (relink_launches_) {
    PORTKIT_RETURN_IF_ERROR(
        db.Exec(std::string(kRelinkLaunches) + " AND trace = " + std::to_string(id_) + "; DROP INDEX events_relink;"));
  } else if (!unlaunched_.empty()) {
    auto upd = db.Prepare("UPDATE events SET launch = ? WHERE rowid = ?");
    if (!upd.ok()) return upd.status();
    for (const auto& [rowid, correlation] : unlaunched_) {
      auto it = call_by_correlation_.find(correlation);
      if (it != call_by_correlation_.end()) PORTKIT_RETURN_IF_ERROR(upd->Bind(1, it->second).Bind(2, rowid).Run());
    }
  }
  unlaunched_.clear();
  call_by_correlation_.clear();
  return Status::Ok();
}

Status TraceWriter::LinkEnclosing() {
  sql::Database& db = *store_->db_;
  std::string t = std::to_string(id_);
  auto q = db.Prepare("SELECT rowid, kind, ts, dur, pid, tid, parent FROM events WHERE trace = " + t +
                      " AND kind IN ('cpu_op', 'runtime', 'driver') ORDER BY pid, tid, ts, dur DESC");
  if (!q.ok()) return q.status();
  auto upd = db.Prepare("UPDATE events SET parent = ? WHERE rowid = ?");
  if (!upd.ok()) return upd.status();
  struct Open {
    int64_t rowid, end;
  };
  std::vector<Open> stack;
  int64_t cur_pid = 0, cur_tid = 0;
  bool first = true;
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    int64_t rowid = q->Int(0);
    bool op = q->Text(1) == "cpu_op";
    int64_t ts = q->Int(2), end = ts + q->Int(3);
    int64_t pid = q->Int(4), tid = q->Int(5);
    if (first || pid != cur_pid || tid != cur_tid) stack.clear(), cur_pid = pid, cur_tid = tid, first = false;
    while (!stack.empty() && stack.back().end <= ts) stack.pop_back();
    if (op) {
      stack.push_back({rowid, end});
    } else if (q->IsNull(6) && !stack.empty()) {
      PORTKIT_RETURN_IF_ERROR(upd->Bind(1, stack.back().rowid).Bind(2, rowid).Run());
    }
  }
  return Status::Ok();
}

Expected<int64_t> TraceWriter::SetKindOfProcess(int64_t pid, EventKind from, EventKind to) {
  if (!tx_) return Status(ErrorCode::kInternal, "trace already finished or aborted");
  sql::Database& db = *store_->db_;
  auto q = db.Prepare("UPDATE events SET kind = ? WHERE trace = ? AND pid = ? AND kind = ?");
  if (!q.ok()) return q.status();
  q->Bind(1, std::string_view(EventKindName(to))).Bind(2, id_).Bind(3, pid);
  PORTKIT_RETURN_IF_ERROR(q->Bind(4, std::string_view(EventKindName(from))).Run());
  int64_t changed = db.Changes();
  if (changed > 0 && (to == EventKind::kRuntime || to == EventKind::kDriver)) needs_enclosing_ = true;
  if (changed > 0 && (to == EventKind::kRuntime || to == EventKind::kDriver || IsDeviceTask(to)))
    relink_launches_ = true;
  return changed;
}

Status TraceWriter::Finish(uint64_t events, uint64_t skipped, std::string_view warning) {
  if (!tx_) return Status(ErrorCode::kInternal, "trace already finished or aborted");
  sql::Database& db = *store_->db_;
  auto q = db.Prepare("UPDATE traces SET events = ?, skipped = ?, warning = ?, marks = ?, base_ns = ? WHERE id = ?");
  Status st = q.status();
  if (st.ok()) {
    q->Bind(1, static_cast<int64_t>(events)).Bind(2, static_cast<int64_t>(skipped));
    if (warning.empty()) q->BindNull(3);
    else q->Bind(3, warning);
    q->Bind(4, marks_);
    if (base_ns_) q->Bind(5, *base_ns_);
    else q->BindNull(5);
    st = q->Bind(6, id_).Run();
  }
  if (st.ok()) st = LinkByExternalId();
  if (st.ok()) st = LinkLaunches();
  // Calls without an External id: linked by nesting (a scan of the trace's calls in thread and
  // time order, sorted by SQLite; no index serves it).
  if (st.ok() && needs_enclosing_) st = LinkEnclosing();
  if (st.ok()) st = tx_->Commit();
  if (!st.ok()) {
    Abort();
    return st;
  }
  tx_.reset();
  // The trace is in: its rows, counts and links. A second connection copies its pages from the
  // WAL into the store file and waits for their fsyncs on a thread of its own, while the caller
  // goes on (the next trace of a folder; the store's destructor waits for it). A new store is
  // renamed into place instead (Store::Publish); if that fails, the trace is not in the store.
  return store_->AfterCommit();
}

void Store::StartCheckpoint() {
  WaitForCheckpoint();
  if (db_->path() == ":memory:") return;
  checkpoint_ = std::thread([path = db_->path()] {
    sql::OpenOptions options;
    options.create = false;
    auto db = sql::Database::Open(path, options);
    if (db.ok()) (void)sqlite3_wal_checkpoint_v2(db->raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  });
}

void Store::WaitForCheckpoint() {
  if (checkpoint_.joinable()) checkpoint_.join();
}

}  // namespace portkit::prof
