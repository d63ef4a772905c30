#include "prof/store.h"

#include <vector>

namespace portkit::prof {

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
constexpr const char* kSchema = R"SQL(
PRAGMA journal_mode = WAL;
PRAGMA cache_size = -65536;
PRAGMA synchronous = NORMAL;
CREATE TABLE IF NOT EXISTS strings (id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS traces (
  id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, format TEXT NOT NULL,
  events INTEGER, skipped INTEGER, warning TEXT);
CREATE TABLE IF NOT EXISTS devices (
  trace INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, properties TEXT);
CREATE TABLE IF NOT EXISTS events (
  trace INTEGER NOT NULL, kind TEXT NOT NULL, name INTEGER NOT NULL, category INTEGER,
  ts INTEGER NOT NULL, dur INTEGER NOT NULL, pid INTEGER, tid INTEGER,
  correlation INTEGER, external_id INTEGER,
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER, block_z INTEGER,
  registers INTEGER, shared_memory INTEGER, occupancy REAL, bytes INTEGER,
  input_dims TEXT, input_types TEXT,
  parent INTEGER);
CREATE VIEW IF NOT EXISTS kernels AS
  SELECT e.*, s.value AS name_text FROM events e JOIN strings s ON s.id = e.name WHERE e.kind = 'kernel';
CREATE VIEW IF NOT EXISTS kernel_launches AS
  SELECT k.trace, k.rowid AS kernel, r.rowid AS launch, r.parent AS cpu_op
  FROM events k
  LEFT JOIN events r ON r.trace = k.trace AND r.correlation = k.correlation AND r.kind IN ('runtime', 'driver')
  WHERE k.kind IN ('kernel', 'gpu_memcpy', 'gpu_memset');
)SQL";
// Built after each bulk insert (maintaining them row by row costs more than building them once).
constexpr const char* kIndexes = R"SQL(
CREATE INDEX IF NOT EXISTS events_kind ON events (trace, kind, ts);
CREATE INDEX IF NOT EXISTS events_correlation ON events (trace, correlation);
CREATE INDEX IF NOT EXISTS events_external ON events (trace, external_id);
)SQL";
}  // namespace

Status Store::Check(int rc, const char* what) {
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) return Status::Ok();
  return IoError(path_ + ": " + what + ": " + sqlite3_errmsg(db_));
}

Status Store::Exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = path_ + ": " + (err ? err : "sqlite error");
    sqlite3_free(err);
    return IoError(msg);
  }
  return Status::Ok();
}

Expected<Store> Store::Open(const std::string& path) {
  Store s;
  s.path_ = path;
  if (sqlite3_open(path.c_str(), &s.db_) != SQLITE_OK)
    return IoError(path + ": cannot open the profile database: " + sqlite3_errmsg(s.db_));
  sqlite3_busy_timeout(s.db_, 10000);
  PORTKIT_RETURN_IF_ERROR(s.Exec(kSchema));
  PORTKIT_RETURN_IF_ERROR(s.Check(
      sqlite3_prepare_v2(s.db_,
                         "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,NULL)", -1,
                         &s.insert_event_, nullptr),
      "prepare"));
  PORTKIT_RETURN_IF_ERROR(s.Check(
      sqlite3_prepare_v2(s.db_, "INSERT INTO strings (value) VALUES (?)", -1, &s.insert_string_, nullptr),
      "prepare"));
  // Existing strings keep their ids.
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(s.db_, "SELECT id, value FROM strings", -1, &q, nullptr);
  while (sqlite3_step(q) == SQLITE_ROW)
    s.strings_.emplace(reinterpret_cast<const char*>(sqlite3_column_text(q, 1)), sqlite3_column_int64(q, 0));
  sqlite3_finalize(q);
  return s;
}

Store::Store(Store&& o) noexcept
    : db_(o.db_), insert_event_(o.insert_event_), insert_string_(o.insert_string_),
      strings_(std::move(o.strings_)), path_(std::move(o.path_)) {
  o.db_ = nullptr;
  o.insert_event_ = o.insert_string_ = nullptr;
}

Store::~Store() {
  if (insert_event_) sqlite3_finalize(insert_event_);
  if (insert_string_) sqlite3_finalize(insert_string_);
  if (db_) sqlite3_close(db_);
}

Expected<int64_t> Store::Intern(std::string_view s) {
  std::string key(s);
  if (auto it = strings_.find(key); it != strings_.end()) return it->second;
  sqlite3_reset(insert_string_);
  sqlite3_bind_text(insert_string_, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
  PORTKIT_RETURN_IF_ERROR(Check(sqlite3_step(insert_string_), "insert string"));
  int64_t id = sqlite3_last_insert_rowid(db_);
  strings_.emplace(std::move(key), id);
  return id;
}

Status Store::ForgetTrace(const std::string& path) {
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db_, "SELECT id FROM traces WHERE path = ?", -1, &q, nullptr);
  sqlite3_bind_text(q, 1, path.c_str(), -1, SQLITE_TRANSIENT);
  int64_t id = -1;
  if (sqlite3_step(q) == SQLITE_ROW) id = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  if (id < 0) return Status::Ok();
  std::string t = std::to_string(id);
  return Exec(("DELETE FROM events WHERE trace = " + t + "; DELETE FROM devices WHERE trace = " + t +
               "; DELETE FROM traces WHERE id = " + t + ";").c_str());
}

Expected<int64_t> Store::BeginTrace(const std::string& path, const std::string& format) {
  PORTKIT_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  PORTKIT_RETURN_IF_ERROR(Exec("DROP INDEX IF EXISTS events_kind; DROP INDEX IF EXISTS events_correlation; "
                               "DROP INDEX IF EXISTS events_external;"));
  PORTKIT_RETURN_IF_ERROR(ForgetTrace(path));
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db_, "INSERT INTO traces (path, format) VALUES (?, ?)", -1, &q, nullptr);
  sqlite3_bind_text(q, 1, path.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q, 2, format.c_str(), -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(q);
  sqlite3_finalize(q);
  PORTKIT_RETURN_IF_ERROR(Check(rc, "insert trace"));
  return sqlite3_last_insert_rowid(db_);
}

Status Store::AddEvent(int64_t trace, const Event& e) {
  auto name = Intern(e.name);
  if (!name.ok()) return name.status();
  auto cat = Intern(e.category);
  if (!cat.ok()) return cat.status();
  sqlite3_stmt* s = insert_event_;
  sqlite3_reset(s);
  int i = 1;
  auto opt = [&](int64_t v) {
    if (v < 0) sqlite3_bind_null(s, i++);
    else sqlite3_bind_int64(s, i++, v);
  };
  sqlite3_bind_int64(s, i++, trace);
  sqlite3_bind_text(s, i++, EventKindName(e.kind), -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, i++, *name);
  sqlite3_bind_int64(s, i++, *cat);
  sqlite3_bind_int64(s, i++, e.ts_ns);
  sqlite3_bind_int64(s, i++, e.dur_ns);
  sqlite3_bind_int64(s, i++, e.pid);
  sqlite3_bind_int64(s, i++, e.tid);
  opt(e.correlation);
  opt(e.external_id);
  for (int64_t v : e.grid) opt(v);
  for (int64_t v : e.block) opt(v);
  opt(e.registers);
  opt(e.shared_memory);
  if (e.occupancy < 0) sqlite3_bind_null(s, i++);
  else sqlite3_bind_double(s, i++, e.occupancy);
  opt(e.bytes);
  if (e.input_dims.empty()) sqlite3_bind_null(s, i++);
  else sqlite3_bind_text(s, i++, e.input_dims.data(), static_cast<int>(e.input_dims.size()), SQLITE_TRANSIENT);
  if (e.input_types.empty()) sqlite3_bind_null(s, i++);
  else sqlite3_bind_text(s, i++, e.input_types.data(), static_cast<int>(e.input_types.size()), SQLITE_TRANSIENT);
  return Check(sqlite3_step(s), "insert event");
}

Status Store::AddDevice(int64_t trace, int64_t id, const std::string& name, const std::string& properties) {
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db_, "INSERT INTO devices VALUES (?, ?, ?, ?)", -1, &q, nullptr);
  sqlite3_bind_int64(q, 1, trace);
  sqlite3_bind_int64(q, 2, id);
  sqlite3_bind_text(q, 3, name.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q, 4, properties.c_str(), -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(q);
  sqlite3_finalize(q);
  return Check(rc, "insert device");
}

Status Store::LinkLaunchesToOps(int64_t trace) {
  // A runtime/driver call belongs to the CPU op with its External id; traces that do not carry
  // that id (HTA's CUDA samples) get the innermost CPU op enclosing the call on its thread.
  std::string t = std::to_string(trace);
  PORTKIT_RETURN_IF_ERROR(Exec(("UPDATE events SET parent = (SELECT c.rowid FROM events c WHERE c.trace = " + t +
                                " AND c.kind = 'cpu_op' AND c.external_id = events.external_id LIMIT 1) "
                                "WHERE trace = " + t + " AND kind IN ('runtime', 'driver') AND external_id IS NOT NULL")
                                   .c_str()));
  sqlite3_stmt* q = nullptr;
  PORTKIT_RETURN_IF_ERROR(Check(
      sqlite3_prepare_v2(db_,
                         ("SELECT rowid, kind, ts, dur, pid, tid, parent FROM events WHERE trace = " + t +
                          " AND kind IN ('cpu_op', 'runtime', 'driver') ORDER BY pid, tid, ts, dur DESC")
                             .c_str(),
                         -1, &q, nullptr),
      "prepare"));
  sqlite3_stmt* upd = nullptr;
  sqlite3_prepare_v2(db_, "UPDATE events SET parent = ? WHERE rowid = ?", -1, &upd, nullptr);
  struct Open {
    int64_t rowid, end;
  };
  std::vector<Open> stack;
  int64_t cur_pid = 0, cur_tid = 0;
  bool first = true;
  Status st;
  while (sqlite3_step(q) == SQLITE_ROW) {
    int64_t rowid = sqlite3_column_int64(q, 0);
    bool op = std::string_view(reinterpret_cast<const char*>(sqlite3_column_text(q, 1))) == "cpu_op";
    int64_t ts = sqlite3_column_int64(q, 2), end = ts + sqlite3_column_int64(q, 3);
    int64_t pid = sqlite3_column_int64(q, 4), tid = sqlite3_column_int64(q, 5);
    if (first || pid != cur_pid || tid != cur_tid) stack.clear(), cur_pid = pid, cur_tid = tid, first = false;
    while (!stack.empty() && stack.back().end <= ts) stack.pop_back();
    if (op) {
      stack.push_back({rowid, end});
    } else if (sqlite3_column_type(q, 6) == SQLITE_NULL && !stack.empty()) {
      sqlite3_reset(upd);
      sqlite3_bind_int64(upd, 1, stack.back().rowid);
      sqlite3_bind_int64(upd, 2, rowid);
      if (sqlite3_step(upd) != SQLITE_DONE) {
        st = Check(SQLITE_ERROR, "link launches");
        break;
      }
    }
  }
  sqlite3_finalize(q);
  sqlite3_finalize(upd);
  return st;
}

Status Store::EndTrace(int64_t trace, uint64_t events, uint64_t skipped, const std::string& warning) {
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db_, "UPDATE traces SET events = ?, skipped = ?, warning = ? WHERE id = ?", -1, &q, nullptr);
  sqlite3_bind_int64(q, 1, static_cast<int64_t>(events));
  sqlite3_bind_int64(q, 2, static_cast<int64_t>(skipped));
  if (warning.empty()) sqlite3_bind_null(q, 3);
  else sqlite3_bind_text(q, 3, warning.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(q, 4, trace);
  int rc = sqlite3_step(q);
  sqlite3_finalize(q);
  PORTKIT_RETURN_IF_ERROR(Check(rc, "update trace"));
  PORTKIT_RETURN_IF_ERROR(Exec(kIndexes));
  PORTKIT_RETURN_IF_ERROR(LinkLaunchesToOps(trace));
  return Exec("COMMIT");
}

}  // namespace portkit::prof
