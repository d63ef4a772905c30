#pragma once
/// The profile store: one SQLite database (`portkit.db`) per profile folder. Writes go through
/// this API only (importers never touch SQL). Timestamps are integer nanoseconds.
///
/// The schema carries a version (`PRAGMA user_version` = kStoreSchemaVersion). A store of schema 1
/// is migrated in place (its traces then have no `args` and no marks until imported again:
/// TraceInfo::detail is false for them). A store without a version (written before versions
/// existed) or with a newer version is refused with a message saying to import the traces again;
/// it is never silently reused.
///
/// Schema 2 keeps what the timeline needs to be lossless: each event's `args` object as its raw
/// JSON text, and every event that is not a complete event ("X") — metadata (process and thread
/// names), counters, instants, flows — as a mark (its raw JSON text, with ph, ts, pid and tid).
///
/// Schema 3 stores each device task's launch (`launch`: the rowid of the runtime/driver call of
/// its trace with its correlation id, linked while the events are written) and has no index; a
/// store of schema 2 is migrated in place (the links computed from the correlation ids).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/sqlite.h"
#include "core/status.h"

namespace portkit::prof {

/// The schema version of `portkit.db` this portkit writes and reads.
inline constexpr int kStoreSchemaVersion = 4;
/// The store's file name inside a profile folder.
inline constexpr std::string_view kStoreFileName = "portkit.db";

/// The longest string a reader of the store reads (a name, an event's `args`, a mark): what
/// `prof import` stores at most by default (ImportLimits::max_object_bytes, 64 MiB). A longer one
/// (a store portkit did not write, or imported with a larger --max-object-mb) fails the reading
/// command with "over the limit" and the flag that raises it; memory stays bounded.
inline constexpr int64_t kDefaultMaxStoredValueBytes = int64_t{64} << 20;

/// What a reader found out of range in a store and left out (docs/safety.md, "Numbers from
/// input"): the store portkit writes never holds such rows; an edited one may.
struct StoreReadNotes {
  /// Events whose ts or dur is not an integer in the importers' bounds (TimesInRange).
  int64_t events_left_out = 0;
  /// Marks (metadata, counters, flows) with a timestamp out of those bounds.
  int64_t marks_left_out = 0;
  /// One warning line naming the store ("" when nothing was left out).
  std::string Warning(const std::string& db_path) const;
};

/// How a reader opens a store.
struct StoreReadOptions {
  int64_t max_value_bytes = kDefaultMaxStoredValueBytes;  ///< see kDefaultMaxStoredValueBytes
  /// The words after the over-the-limit message (the reading command's flag).
  std::string_view limit_remedy = "--max-string-mb raises the limit";
};

/// Opens the store at `db_path` read-only for a reader (the exporters, the advisor, diff; tune
/// reads operator shapes from it): kNotFound when there is none, kUnsupported (with what to do)
/// when its schema version is not kStoreSchemaVersion or its schema is not exactly the one portkit
/// writes (a view, a trigger, a table or column of its own: refused before any row is read),
/// kParse when it is not a SQLite file, kIo naming the folder when it cannot be read there. A
/// store in a folder this process cannot write is read as an immutable file when its write-ahead
/// log is empty. Rows whose numbers are out of the importers' range are hidden from every query
/// of the connection (TEMP views over `events` and `marks`) and counted in `*notes`.
Expected<sql::Database> OpenStoreForReading(const std::filesystem::path& db_path, StoreReadNotes* notes = nullptr,
                                            const StoreReadOptions& options = {});

/// Categories of timed events.
enum class EventKind : uint8_t {
  kCpuOp,
  kUserAnnotation,
  kGpuAnnotation,
  kKernel,
  kMemcpy,
  kMemset,
  kRuntime,
  kDriver,
  kSync,
  kPythonFunction,
  kStep,
  kOther
};
const char* EventKindName(EventKind k);
/// A task on the device (kernel, memcpy, memset): what a runtime/driver call launches.
bool IsDeviceTask(EventKind k);

struct Event {
  EventKind kind = EventKind::kOther;
  std::string_view name;
  std::string_view category;  ///< the trace's own `cat`
  int64_t ts_ns = 0, dur_ns = 0;
  int64_t pid = 0, tid = 0;  ///< for device events: device and stream
  int64_t correlation = -1, external_id = -1;
  // Kernel launch geometry and resources (-1 when absent).
  int64_t grid[3] = {-1, -1, -1}, block[3] = {-1, -1, -1};
  int64_t registers = -1, shared_memory = -1, bytes = -1;
  double occupancy = -1;
  std::string_view input_dims, input_types;  ///< raw JSON text when recorded
  std::string_view args;                     ///< the event's `args` object, raw JSON text; empty when none
  /// Optional, for importers that intern names on a thread of their own: a small number
  /// (0, 1, 2, ... within one trace) that is the same for every event whose name (resp.
  /// category) has the same text, so the store's thread looks the text up once per distinct
  /// string instead of once per event. -1: look `name` (`category`) up.
  int32_t name_key = -1, category_key = -1;
};

/// An event that is not a complete event ("X"): metadata ("M"), counter ("C"), instant ("i", "I"),
/// flow ("s", "t", "f"), async or other phases. Kept as the trace wrote it.
struct Mark {
  std::string_view ph;
  bool has_ts = false;
  int64_t ts_ns = 0;
  int64_t pid = 0, tid = 0;
  std::string_view json;  ///< the whole event object, raw JSON text
};

class Store;

/// An exclusive lock (flock) on a folder, held by the writer building a new store there;
/// released when destroyed. fd < 0: none.
struct FolderLock {
  int fd = -1;
  FolderLock() = default;
  explicit FolderLock(int f) : fd(f) {}
  FolderLock(FolderLock&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  FolderLock& operator=(FolderLock&& o) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  ~FolderLock();
};

/// One trace being written: everything between Store::BeginTrace and Finish is one transaction.
/// Destroyed without a successful Finish, it rolls back (the store is as before, including an
/// earlier import of the same file) — no error path leaves the transaction open.
class TraceWriter {
 public:
  TraceWriter(TraceWriter&& o) noexcept;
  TraceWriter& operator=(TraceWriter&&) = delete;
  TraceWriter(const TraceWriter&) = delete;
  ~TraceWriter();

  int64_t id() const { return id_; }
  Status AddEvent(const Event& e);
  /// AddEvent of each of `events`, in order, several rows per INSERT where a run of events allows
  /// it (the same rows and rowids, fewer statements).
  Status AddEvents(std::span<const Event> events);
  Status AddMark(const Mark& m);
  /// AddMark of each of `marks`, in order, several rows per INSERT (the same rows, fewer statements).
  Status AddMarks(std::span<const Mark> marks);
  Status AddDevice(int64_t id, std::string_view name, std::string_view properties);
  /// The trace's clock: its timestamps count from `base_ns` nanoseconds since the epoch (Kineto's
  /// baseTimeNanoseconds). Stored by Finish (`traces.base_ns`); unset: the timestamps are the
  /// trace's own (absolute for older Kineto, from the profiler's start for the legacy profiler).
  void SetBaseTime(int64_t base_ns) { base_ns_ = base_ns; }
  /// Re-kinds this trace's events of process `pid` stored as `from` (a process whose name came
  /// after its events); returns how many changed.
  Expected<int64_t> SetKindOfProcess(int64_t pid, EventKind from, EventKind to);
  /// Records the counts, links launches to operators and device tasks to their launches, and
  /// commits; then starts the checkpoint of the trace's pages on another thread (Store waits for
  /// it before the next one and when destroyed).
  Status Finish(uint64_t events, uint64_t skipped, std::string_view warning);
  /// Rolls back now (what the destructor does when Finish was not reached).
  void Abort();

 private:
  friend class Store;
  TraceWriter(Store* store, std::unique_ptr<sql::Transaction> tx, int64_t id)
      : store_(store), tx_(std::move(tx)), id_(id) {}
  /// Links the calls whose op came after them (by External id); the rest need LinkEnclosing.
  Status LinkByExternalId();
  /// Links the device tasks whose call came after them (or all, after a re-kind).
  Status LinkLaunches();
  /// Links calls without an op of their External id to the innermost CPU op enclosing them.
  Status LinkEnclosing();
  /// What AddEvent works out for an event before its row is bound: its string ids, its links and
  /// the optional columns it has (bit i: column i of kEventOptionalColumns, in store.cc).
  struct Row {
    int64_t name = 0, category = 0, parent = -1, launch = -1;
    uint32_t present = 0;
  };
  /// Checks the limits and works out `e`'s Row (looking up the links made so far).
  Status PrepareRow(const Event& e, Row* row);
  /// Records the links `e`, stored at `rowid`, makes for the events after it.
  void Remember(const Event& e, const Row& row, int64_t rowid);
  /// Binds `e`'s values to parameters `*i`, `*i + 1`, ... of `s`, whose optional columns are
  /// `columns` (a superset of row.present: the others are bound NULL); advances `*i`.
  static void BindRow(sql::Statement& s, int* i, int64_t trace, uint32_t columns, const Event& e, const Row& row);
  /// The store's id of `text`, whose importer key is `key` (Event::name_key), or of `text`
  /// alone when `key` is -1.
  Expected<int64_t> StringId(int32_t key, std::string_view text);
  Store* store_;
  std::unique_ptr<sql::Transaction> tx_;
  int64_t id_;
  int64_t marks_ = 0;
  // Launch → CPU op links made while the events stream in: the first CPU op of each External id,
  // and the calls whose op had not come yet (linked at Finish).
  std::unordered_map<int64_t, int64_t> op_by_external_;
  std::vector<std::pair<int64_t, int64_t>> unlinked_;  // (rowid, external id)
  bool needs_enclosing_ = false;  // a runtime/driver call without an External id op: link by nesting
  // Device task → launching call links: the first call of each correlation id, and the tasks whose
  // call had not come yet (linked at Finish); after a re-kind the whole trace is linked again.
  std::unordered_map<int64_t, int64_t> call_by_correlation_;
  std::vector<std::pair<int64_t, int64_t>> unlaunched_;  // (rowid, correlation)
  bool relink_launches_ = false;
  std::vector<int64_t> id_of_key_;  // Event::name_key / category_key → string id; -1 not yet known
  uint64_t events_ = 0;             // added so far, for Store::SetTraceLimits
  int64_t next_rowid_ = -1;         // the rowid the next event gets (-1: not known yet)
  std::optional<int64_t> base_ns_;
  int64_t start_pages_ = -1;  // the store's page count when the trace began (-1: not measured)
  /// Checks the caps of Store::SetTraceLimits before the next event is stored.
  Status CheckLimits();
};

class Store {
 public:
  /// Opens (creating when absent) the store for writing. An existing store of another schema
  /// version is refused (kUnsupported) with what to do.
  ///
  /// A store that does not exist yet is built in a temporary file beside it (`<path>.new-<pid>`,
  /// without a journal on disk and without fsyncs while it is written) and renamed to `path` when
  /// its first trace is finished (TraceWriter::Finish) or, when no trace is, when the Store is
  /// destroyed: fsynced, switched to WAL and renamed, never over a file of that name. From then on
  /// the store is written as an existing one (WAL, one transaction per trace). While the file is
  /// being built the folder is locked (flock): a second writer of the same store waits (up to an
  /// hour, as for a trace's transaction) and then opens the renamed store. A temporary file left by
  /// a killed process is removed by the next writer that builds the store.
  static Expected<Store> Open(const std::filesystem::path& path);
  /// Opens an existing store read-only (the exporters, the advisor, diff): OpenStoreForReading.
  static Expected<Store> OpenForReading(const std::filesystem::path& path, const StoreReadOptions& options = {});
  /// What OpenForReading left out (rows out of range).
  const StoreReadNotes& read_notes() const { return read_notes_; }
  Store(Store&& o) noexcept = default;
  Store& operator=(Store&&) = delete;
  /// Waits for a checkpoint still running (see TraceWriter::Finish); a store still in its temporary
  /// file (no trace finished) is renamed into place (best effort).
  ~Store();

  /// Starts a trace (replacing an earlier import of the same `path`). Only one trace is written
  /// at a time.
  Expected<TraceWriter> BeginTrace(std::string_view path, std::string_view format);

  sql::Database& db() { return *db_; }

  /// The caps each trace written from now on is held to (ImportLimits::max_events and
  /// max_store_growth_bytes; 0: none): past either, AddEvent fails with "over the limit" and the
  /// trace is rolled back.
  void SetTraceLimits(uint64_t max_events, uint64_t max_growth_bytes) {
    max_events_ = max_events, max_growth_bytes_ = max_growth_bytes;
  }

  /// Waits for the checkpoint TraceWriter::Finish started, if it still runs (a caller that
  /// checkpoints on its own would otherwise race it and get SQLITE_BUSY).
  void WaitForCheckpoint();

  /// The paths of the stored traces, sorted.
  Expected<std::vector<std::string>> TracePaths();
  /// Removes the traces at `paths` (their events, marks and devices) in one transaction.
  Status DropTraces(const std::vector<std::string>& paths);

 private:
  friend class TraceWriter;
  Store() = default;
  Expected<int64_t> Intern(std::string_view s);
  /// The INSERT into events naming the optional columns of `*columns` (bit i: column i of
  /// kEventOptionalColumns, in store.cc) and no others, prepared on first use. Once the cache is
  /// full, a set not in it gets the statement naming every column (`*columns` says so).
  Expected<sql::Statement*> InsertEventStatement(uint32_t* columns);
  /// The INSERT of kEventsPerInsert rows naming the optional columns `columns`, prepared on first
  /// use; null once its cache is full and `columns` is not in it (the caller inserts row by row).
  Expected<sql::Statement*> InsertEventsStatement(uint32_t columns);
  /// Copies the committed pages of the WAL into the store file on a thread of its own (a second
  /// connection), while this one goes on; WaitForCheckpoint joins it. Best effort: a checkpoint
  /// that fails leaves the pages in the WAL, where readers find them and a later one copies them.
  void StartCheckpoint();
  /// Forgets string ids learnt inside a transaction that was rolled back.
  void OnRollback() { strings_.clear(); }
  /// After a trace's commit: renames a store built in its temporary file into place (Publish), or
  /// starts the checkpoint of an existing one.
  Status AfterCommit();
  /// Fsyncs the temporary file, switched to WAL, renames it to `publish_to_` (never over a file)
  /// and opens the store there as an existing one. A no-op for a store that was not new.
  Status Publish();
  /// Opens the connection to `file` (`fresh`: a new store's temporary file, written without a
  /// journal on disk and without fsyncs) and prepares the statements.
  static Expected<Store> OpenFile(const std::filesystem::path& file, bool fresh);
  /// The path the store is known by (its final path while it is built in a temporary file).
  const std::string& path() const;

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  /// The store's size in pages and its page size (PRAGMA page_count / page_size), in the
  /// transaction in hand.
  Expected<std::pair<int64_t, int64_t>> Pages();
  uint64_t max_events_ = 0, max_growth_bytes_ = 0;
  StoreReadNotes read_notes_;
  std::unique_ptr<sql::Database> db_;  // heap: statements and transactions keep its address
  std::string publish_to_;             // a new store's path while it is built in a temporary file
  FolderLock folder_lock_;             // held while publish_to_ is set
  std::thread checkpoint_;             // StartCheckpoint's thread, while it runs
  std::unique_ptr<sql::Statement> insert_mark_, insert_string_, find_string_;
  std::unique_ptr<sql::Statement> insert_marks_;  ///< kMarksPerInsert rows (TraceWriter::AddMarks)
  // One INSERT per set of columns an event has (a CPU op, a launch and a kernel each fill other
  // columns): absent columns are left to their default NULL instead of bound one by one.
  std::unordered_map<uint32_t, std::unique_ptr<sql::Statement>> insert_event_;
  std::unordered_map<uint32_t, std::unique_ptr<sql::Statement>> insert_events_;  ///< InsertEventsStatement
  // Ids of strings in the store (learnt in committed or the current transaction; strings are
  // never deleted, so an id stays valid for other processes' imports too).
  std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>> strings_;
};

}  // namespace portkit::prof
