// The profile store: schema version, transactions that always end, string ids after a rollback.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <unistd.h>

#include "prof/store.h"
#include "store_schema_util.h"

namespace portkit::prof {
namespace {
namespace fs = std::filesystem;

class ProfStore : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_store_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = dir_ / "portkit.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  static Event Kernel(std::string_view name, int64_t ts) {
    Event e;
    e.kind = EventKind::kKernel;
    e.name = name;
    e.category = "kernel";
    e.ts_ns = ts;
    e.dur_ns = 10;
    return e;
  }
  /// Names of the stored events (through the strings table), in time order.
  static std::vector<std::string> Names(Store& store) {
    auto q = store.db().Prepare(
        "SELECT COALESCE(s.value, '<dangling>') FROM events e LEFT JOIN strings s ON s.id = e.name ORDER BY e.ts");
    EXPECT_TRUE(q.ok());
    std::vector<std::string> out;
    while (*q->Step()) out.emplace_back(q->Text(0));
    return out;
  }

  fs::path dir_, path_;
};

TEST_F(ProfStore, ANewStoreCarriesTheSchemaVersion) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().message();
    EXPECT_EQ(*store->db().UserVersion(), kStoreSchemaVersion);
  }
  auto reader = OpenStoreForReading(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_TRUE(reader->read_only());
}

TEST_F(ProfStore, AStoreWithoutAVersionIsRefusedWithWhatToDo) {
  // What portkit wrote before schema versions: the same tables, user_version 0.
  {
    auto db = sql::Database::Open(path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("CREATE TABLE strings (id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);"
                         "CREATE TABLE traces (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, format TEXT);")
                    .ok());
  }
  for (bool read_only : {false, true}) {
    Status st = read_only ? OpenStoreForReading(path_).status() : Store::Open(path_).status();
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(st.message(), path_.string() +
                                ": a profile store without a schema version (written by an older portkit, or not by "
                                "portkit); this portkit reads schema 4; delete it and run `portkit prof import` on "
                                "the traces again");
  }
}

TEST_F(ProfStore, ANewerSchemaIsRefused) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE(store->db().SetUserVersion(kStoreSchemaVersion + 1).ok());
  }
  Status st = Store::Open(path_).status();
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported);
  EXPECT_NE(st.message().find("is newer than this portkit reads"), std::string::npos) << st.message();
}

// Schema 3 had no traces.base_ns: such a store gains it (NULL: the trace's own clock) when opened.
TEST_F(ProfStore, SchemaThreeGainsTheTraceClock) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE(store->db().Exec("ALTER TABLE traces DROP COLUMN base_ns; PRAGMA user_version = 3;").ok());
  }
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(*store->db().UserVersion(), kStoreSchemaVersion);
  auto writer = store->BeginTrace("t.json", "kineto");
  ASSERT_TRUE(writer.ok());
  writer->SetBaseTime(1'700'000'000'000'000'000);
  ASSERT_TRUE(writer->Finish(0, 0, "").ok());
  auto q = store->db().Prepare("SELECT base_ns FROM traces WHERE path = 't.json'");
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(*q->Step());
  EXPECT_EQ(q->Int(0), 1'700'000'000'000'000'000);
}

TEST_F(ProfStore, NoStoreIsNotFound) {
  EXPECT_EQ(OpenStoreForReading(dir_ / "none.db").status().code(), ErrorCode::kNotFound);
}

TEST_F(ProfStore, AnAbortedTraceLeavesNoTransactionAndNoStaleStringIds) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  {
    auto writer = store->BeginTrace("a.json", "kineto");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->AddEvent(Kernel("only_in_the_rolled_back_trace", 1)).ok());
    // Destroyed without Finish: rolled back.
  }
  // No transaction is left open on the connection.
  ASSERT_TRUE(store->db().Exec("BEGIN IMMEDIATE").ok());
  ASSERT_TRUE(store->db().Exec("ROLLBACK").ok());
  auto writer = store->BeginTrace("b.json", "kineto");
  ASSERT_TRUE(writer.ok());
  // The same name again: its id must be a string that exists now, not the rolled-back one.
  ASSERT_TRUE(writer->AddEvent(Kernel("only_in_the_rolled_back_trace", 2)).ok());
  ASSERT_TRUE(writer->AddEvent(Kernel("other", 3)).ok());
  ASSERT_TRUE(writer->Finish(2, 0, "").ok());
  EXPECT_EQ(Names(*store), (std::vector<std::string>{"only_in_the_rolled_back_trace", "other"}));
}

TEST_F(ProfStore, ReimportReplacesTheEarlierTraceAndAnAbortKeepsIt) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  for (const char* name : {"first", "second"}) {
    auto writer = store->BeginTrace("a.json", "kineto");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->AddEvent(Kernel(name, 1)).ok());
    ASSERT_TRUE(writer->Finish(1, 0, "").ok());
  }
  EXPECT_EQ(Names(*store), (std::vector<std::string>{"second"}));
  {
    auto writer = store->BeginTrace("a.json", "kineto");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->AddEvent(Kernel("third", 1)).ok());
    writer->Abort();
  }
  EXPECT_EQ(Names(*store), (std::vector<std::string>{"second"}));
}

// Each event is written by the INSERT naming the columns it has (one statement per set of
// columns, up to a cap, then one naming them all): whichever statement wrote it, a row holds the
// event's values and NULL for every column the event lacks.
TEST_F(ProfStore, EveryEventKeepsItsColumnsWhicheverInsertWroteIt) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  auto writer = store->BeginTrace("a.json", "kineto");
  ASSERT_TRUE(writer.ok());
  // 300 events with 300 different sets of the 16 optional columns (past the cache's 64), each
  // column's value derived from the event's number; names by importer key or by text.
  const std::string names[] = {"aten::mm", "void gemm<float>(Params)", "cudaLaunchKernel"};
  std::vector<std::string> texts(300);
  auto has = [](int k, int bit) { return ((static_cast<uint32_t>(k) * 40503u + 7u) >> bit & 1u) != 0; };
  for (int k = 0; k < 300; ++k) {
    Event e;
    e.kind = EventKind::kKernel;
    e.name = names[k % 3];
    if (k % 2 == 0) e.name_key = k % 3;
    e.category = "kernel";
    e.ts_ns = k;
    e.dur_ns = 1;
    int64_t* ints[] = {&e.correlation, &e.external_id, &e.grid[0],  &e.grid[1],   &e.grid[2],
                       &e.block[0],    &e.block[1],    &e.block[2], &e.registers, &e.shared_memory};
    for (int c = 0; c < 10; ++c)
      if (has(k, c)) *ints[c] = 1000 * k + c;
    if (has(k, 10)) e.occupancy = k + 0.5;
    if (has(k, 11)) e.bytes = 1000 * k + 11;
    texts[k] = "[" + std::to_string(k) + "]";
    if (has(k, 12)) e.input_dims = texts[k];
    if (has(k, 13)) e.input_types = texts[k];
    if (has(k, 15)) e.args = texts[k];
    ASSERT_TRUE(writer->AddEvent(e).ok()) << k;
  }
  ASSERT_TRUE(writer->Finish(300, 0, "").ok());
  auto q = store->db().Prepare(
      "SELECT s.value, e.correlation, e.external_id, e.grid_x, e.grid_y, e.grid_z, e.block_x, e.block_y, "
      "e.block_z, e.registers, e.shared_memory, e.occupancy, e.bytes, e.input_dims, e.input_types, e.parent, "
      "e.args, e.kind, e.ts FROM events e JOIN strings s ON s.id = e.name ORDER BY e.ts");
  ASSERT_TRUE(q.ok());
  int k = 0;
  for (; *q->Step(); ++k) {
    ASSERT_EQ(q->Int(18), k);
    EXPECT_EQ(q->Text(0), names[k % 3]) << k;
    for (int c = 0; c < 10; ++c) {
      EXPECT_EQ(q->IsNull(1 + c), !has(k, c)) << k << " column " << c;
      if (has(k, c)) EXPECT_EQ(q->Int(1 + c), 1000 * k + c) << k << " column " << c;
    }
    EXPECT_EQ(q->IsNull(11), !has(k, 10)) << k;
    if (has(k, 10)) EXPECT_EQ(q->Double(11), k + 0.5) << k;
    EXPECT_EQ(q->IsNull(12), !has(k, 11)) << k;
    if (has(k, 11)) EXPECT_EQ(q->Int(12), 1000 * k + 11) << k;
    for (int c : {12, 13, 15}) {
      const int column = c == 15 ? 16 : c + 1;
      EXPECT_EQ(q->IsNull(column), !has(k, c)) << k << " column " << c;
      if (has(k, c)) EXPECT_EQ(q->Text(column), texts[k]) << k << " column " << c;
    }
    EXPECT_TRUE(q->IsNull(15)) << k;  // parent: kernels have none
    EXPECT_EQ(q->Text(17), "kernel");
  }
  EXPECT_EQ(k, 300);
}

// Importer keys name strings within one trace only: after a rolled-back trace, the same keys in the
// next trace still get strings that exist.
TEST_F(ProfStore, ImporterKeysOfARolledBackTraceAreForgotten) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  {
    auto writer = store->BeginTrace("a.json", "kineto");
    ASSERT_TRUE(writer.ok());
    Event e = Kernel("rolled_back", 1);
    e.name_key = 0;
    ASSERT_TRUE(writer->AddEvent(e).ok());
  }
  auto writer = store->BeginTrace("b.json", "kineto");
  ASSERT_TRUE(writer.ok());
  Event e = Kernel("kept", 2);
  e.name_key = 0;
  ASSERT_TRUE(writer->AddEvent(e).ok());
  e.ts_ns = 3;
  ASSERT_TRUE(writer->AddEvent(e).ok());
  ASSERT_TRUE(writer->Finish(2, 0, "").ok());
  EXPECT_EQ(Names(*store), (std::vector<std::string>{"kept", "kept"}));
}

// Finish links and commits the trace, then checkpoints it on another thread; the store has no
// index (docs/prof.md, "Store"). Every call is linked to its op (by External id, or by nesting
// when there are none) and every kernel to its launch, whether the kernel came after its call
// (linked as it is written) or before it (linked at Finish).
TEST_F(ProfStore, FinishLinksEveryLaunchAndLeavesNoIndex) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  for (bool nested : {false, true}) {
    auto writer = store->BeginTrace(nested ? "nested.json" : "a.json", "kineto");
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 2000; ++i) {
      Event op;
      op.kind = EventKind::kCpuOp;
      op.name = "aten::mm";
      op.ts_ns = 100 * i;
      op.dur_ns = 50;
      op.external_id = nested ? -1 : i;
      Event call = op;
      call.kind = EventKind::kRuntime;
      call.name = "cudaLaunchKernel";
      call.ts_ns += 10;
      call.dur_ns = 10;
      call.correlation = i;
      Event kernel = Kernel("k", 100 * i + 30);
      kernel.correlation = i;
      // The kernels of the nested trace come before their calls.
      if (nested) ASSERT_TRUE(writer->AddEvent(kernel).ok());
      ASSERT_TRUE(writer->AddEvent(op).ok());
      ASSERT_TRUE(writer->AddEvent(call).ok());
      if (!nested) ASSERT_TRUE(writer->AddEvent(kernel).ok());
    }
    ASSERT_TRUE(writer->Finish(6000, 0, "").ok());
    std::vector<std::string> indexes;
    auto q = store->db().Prepare(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'events%' ORDER BY name");
    ASSERT_TRUE(q.ok());
    while (*q->Step()) indexes.emplace_back(q->Text(0));
    EXPECT_TRUE(indexes.empty()) << nested;
    // Finish's checkpoint runs on another thread; wait for it, then a passive checkpoint of our
    // own finds every page of the trace already copied.
    store->WaitForCheckpoint();
    int log = -1, copied = -2;
    ASSERT_EQ(sqlite3_wal_checkpoint_v2(store->db().raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &copied),
              SQLITE_OK);
    EXPECT_EQ(log, copied) << nested;
    auto count = [&](const std::string& sql) {
      auto c = store->db().Prepare(sql);
      EXPECT_TRUE(c.ok()) << sql;
      EXPECT_TRUE(*c->Step()) << sql;
      return c->Int(0);
    };
    const std::string t =
        "(SELECT id FROM traces WHERE path = '" + std::string(nested ? "nested.json" : "a.json") + "')";
    EXPECT_EQ(count("SELECT COUNT(*) FROM events WHERE kind = 'runtime' AND parent IS NULL AND trace = " + t), 0)
        << nested;
    // Each kernel's launch is the call of its correlation id, and that call's op is the kernel's op.
    EXPECT_EQ(count("SELECT COUNT(*) FROM kernel_launches l JOIN events k ON k.rowid = l.kernel "
                    "JOIN events r ON r.rowid = l.launch JOIN events o ON o.rowid = l.cpu_op "
                    "WHERE r.correlation = k.correlation AND r.kind = 'runtime' AND o.kind = 'cpu_op' "
                    "AND o.ts = k.ts - 30 AND l.trace = " +
                    t),
              2000)
        << nested;
  }
}

// Calls stored under another kind and re-kinded once their process is named (an Ascend trace
// whose metadata comes after its events): their tasks are linked when the trace ends.
TEST_F(ProfStore, TasksOfCallsReKindedLaterAreLinked) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  auto writer = store->BeginTrace("late.json", "ascend_pt");
  ASSERT_TRUE(writer.ok());
  for (int i = 0; i < 20; ++i) {
    Event call;
    call.kind = EventKind::kOther;
    call.name = "aclnnAdd";
    call.pid = 5;
    call.ts_ns = 100 * i;
    call.correlation = i;
    Event task = Kernel("Add", 100 * i + 30);
    task.correlation = i;
    ASSERT_TRUE(writer->AddEvent(call).ok());
    ASSERT_TRUE(writer->AddEvent(task).ok());
  }
  auto moved = writer->SetKindOfProcess(5, EventKind::kOther, EventKind::kRuntime);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(*moved, 20);
  ASSERT_TRUE(writer->Finish(40, 0, "").ok());
  auto q = store->db().Prepare(
      "SELECT COUNT(*), SUM(r.correlation = k.correlation AND r.kind = 'runtime'), "
      "(SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name LIKE 'events%') "
      "FROM kernel_launches l JOIN events k ON k.rowid = l.kernel JOIN events r ON r.rowid = l.launch");
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(*q->Step());
  EXPECT_EQ(q->Int(0), 20);
  EXPECT_EQ(q->Int(1), 20);
  EXPECT_EQ(q->Int(2), 0);  // the index of the relink is gone
}

// A store of schema 2 (the launch found through the correlation ids by the view, an index on
// them) is migrated in place: the links are stored, the old indexes gone, the view the same rows.
TEST_F(ProfStore, AStoreOfSchemaTwoGetsItsLaunchLinks) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok());
    auto writer = store->BeginTrace("a.json", "kineto");
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 50; ++i) {
      Event call;
      call.kind = EventKind::kRuntime;
      call.name = "cudaLaunchKernel";
      call.ts_ns = 100 * i;
      call.correlation = i;
      Event kernel = Kernel("k", 100 * i + 30);
      kernel.correlation = i % 10 == 0 ? 1000 + i : i;  // every tenth kernel without its call
      ASSERT_TRUE(writer->AddEvent(call).ok());
      ASSERT_TRUE(writer->AddEvent(kernel).ok());
    }
    ASSERT_TRUE(writer->Finish(100, 0, "").ok());
    ASSERT_TRUE(
        store->db()
            .Exec(std::string(testing::kUndoSchemaThreeLaunch) +
                  "CREATE INDEX events_kind ON events (trace, kind, ts); "
                  "CREATE INDEX events_launch ON events (trace, correlation) WHERE kind IN ('runtime', 'driver'); "
                  "PRAGMA user_version = 2;")
            .ok());
  }
  auto store = Store::OpenForReading(path_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(*store->db().UserVersion(), kStoreSchemaVersion);
  auto q = store->db().Prepare(
      "SELECT COUNT(*), COUNT(l.launch), SUM(r.correlation = k.correlation), "
      "(SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name LIKE 'events%') "
      "FROM kernel_launches l JOIN events k ON k.rowid = l.kernel LEFT JOIN events r ON r.rowid = l.launch");
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(*q->Step());
  EXPECT_EQ(q->Int(0), 50);
  EXPECT_EQ(q->Int(1), 45);
  EXPECT_EQ(q->Int(2), 45);
  EXPECT_EQ(q->Int(3), 0);
}

TEST_F(ProfStore, AReadOnlyStoreCannotBeWritten) {
  { ASSERT_TRUE(Store::Open(path_).ok()); }
  auto store = Store::OpenForReading(path_);
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE(store->BeginTrace("a.json", "kineto").ok());
}

// ---- A store portkit did not write (docs/safety.md, "SQLite inputs") --------------------------

TEST_F(ProfStore, RowsOutOfRangeAreHiddenFromReadersAndCounted) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok());
    auto trace = store->BeginTrace("a.json", "kineto");
    ASSERT_TRUE(trace.ok());
    for (int64_t ts : {100, 200, 300}) ASSERT_TRUE(trace->AddEvent(Kernel("k", ts)).ok());
    ASSERT_TRUE(trace->Finish(3, 0, "").ok());
  }
  {
    auto db = sql::Database::Open(path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("UPDATE events SET ts = -9200000000000000000 WHERE ts = 100; "
                         "UPDATE events SET dur = 9200000000000000000 WHERE ts = 200;")
                    .ok());
  }
  auto store = Store::OpenForReading(path_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(store->read_notes().events_left_out, 2);
  EXPECT_EQ(store->read_notes().Warning("portkit.db"),
            "portkit.db: 2 events left out: a timestamp or duration out of range (durations 0 to 1e14 ns, timestamps "
            "up to 4e18 ns; `prof import` never stores such rows: was the store edited?)");
  auto q = store->db().Prepare("SELECT count(*), min(ts), max(dur) FROM events");
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(*q->Step());
  EXPECT_EQ(q->Int(0), 1);
  EXPECT_EQ(q->Int(1), 300);
  EXPECT_EQ(q->Int(2), 10);
  auto launches = store->db().Prepare("SELECT count(*) FROM kernel_launches");
  ASSERT_TRUE(launches.ok());
  ASSERT_TRUE(*launches->Step());
  EXPECT_EQ(launches->Int(0), 1);
}

TEST_F(ProfStore, AForeignViewOrTriggerIsRefusedForReadingAndWriting) {
  { ASSERT_TRUE(Store::Open(path_).ok()); }
  {
    auto db = sql::Database::Open(path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("CREATE TRIGGER spy AFTER INSERT ON events BEGIN DELETE FROM traces; END;").ok());
  }
  for (bool reading : {true, false}) {
    Status st = reading ? Store::OpenForReading(path_).status() : Store::Open(path_).status();
    EXPECT_EQ(st.code(), ErrorCode::kUnsupported);
    EXPECT_NE(st.message().find(path_.string() + ": not a profile store as portkit writes it: it holds a trigger "
                                                 "'spy' on 'events'"),
              std::string::npos)
        << st.message();
  }
}

/// The files of the test's folder, sorted.
std::vector<std::string> FolderFiles(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(ProfStore, ANewStoreIsBuiltAsideAndAppearsWholeWhenItsFirstTraceIsDone) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  const std::string temp = "portkit.db.new-" + std::to_string(::getpid());
  // While the first trace is written no store is there: a reader finds none, never half of one.
  EXPECT_EQ(FolderFiles(dir_), std::vector<std::string>{temp});
  auto writer = store->BeginTrace("a.json", "kineto");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->AddEvent(Kernel("k", 1)).ok());
  EXPECT_EQ(OpenStoreForReading(path_).status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(writer->Finish(1, 0, "").ok());
  // Renamed into place, a WAL store like any other, which the next trace is written into.
  EXPECT_EQ(FolderFiles(dir_)[0], "portkit.db");
  for (const auto& f : FolderFiles(dir_)) EXPECT_EQ(f.find(".new-"), std::string::npos) << f;
  {
    auto mode = store->db().Prepare("PRAGMA journal_mode");
    ASSERT_TRUE(mode.ok() && *mode->Step());
    EXPECT_EQ(mode->Text(0), "wal");
  }
  auto second = store->BeginTrace("b.json", "kineto");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->AddEvent(Kernel("k", 2)).ok());
  Status finished = second->Finish(1, 0, "");
  ASSERT_TRUE(finished.ok()) << finished.message();
  auto reader = OpenStoreForReading(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto q = reader->Prepare("SELECT count(*), count(DISTINCT name) FROM events");
  ASSERT_TRUE(q.ok() && *q->Step());
  EXPECT_EQ(q->Int(0), 2);
  EXPECT_EQ(q->Int(1), 1);
}

TEST_F(ProfStore, ATemporaryStoreOfAKilledWriterIsRemoved) {
  const fs::path stale = dir_ / "portkit.db.new-999999999";
  std::ofstream(stale) << "half a store";
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_FALSE(fs::exists(stale));
}

TEST_F(ProfStore, AFileMadeAtThePathMeanwhileIsNeverReplaced) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto writer = store->BeginTrace("a.json", "kineto");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->AddEvent(Kernel("k", 1)).ok());
  std::ofstream(path_) << "not ours";
  Status st = writer->Finish(1, 0, "");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("was created by another program"), std::string::npos) << st.message();
  std::ifstream in(path_);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "not ours");
  EXPECT_EQ(FolderFiles(dir_), std::vector<std::string>{"portkit.db"});
}

TEST_F(ProfStore, ASecondWriterOfANewStoreWaitsForItAndThenWritesIntoIt) {
  auto first = Store::Open(path_);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto writer = first->BeginTrace("a.json", "kineto");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->AddEvent(Kernel("from_the_first", 1)).ok());
  std::atomic<bool> opened{false};
  std::vector<std::string> seen;
  std::thread other([&] {
    auto second = Store::Open(path_);
    opened = true;
    ASSERT_TRUE(second.ok()) << second.status().message();
    auto w = second->BeginTrace("b.json", "kineto");
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_TRUE(w->AddEvent(Kernel("from_the_second", 2)).ok());
    ASSERT_TRUE(w->Finish(1, 0, "").ok());
    seen = Names(*second);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(opened.load());  // waiting for the folder's lock
  ASSERT_TRUE(writer->Finish(1, 0, "").ok());
  other.join();
  EXPECT_EQ(seen, (std::vector<std::string>{"from_the_first", "from_the_second"}));
}

}  // namespace
}  // namespace portkit::prof
