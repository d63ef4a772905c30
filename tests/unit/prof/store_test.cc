// The profile store: schema version, transactions that always end, string ids after a rollback.
#include <gtest/gtest.h>

#include <filesystem>

#include "prof/store.h"

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
                                "portkit); this portkit reads schema 2; delete it and run `portkit prof import` on "
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

TEST_F(ProfStore, AReadOnlyStoreCannotBeWritten) {
  { ASSERT_TRUE(Store::Open(path_).ok()); }
  auto store = Store::OpenForReading(path_);
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE(store->BeginTrace("a.json", "kineto").ok());
}

}  // namespace
}  // namespace portkit::prof
