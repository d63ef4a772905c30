#include "core/sqlite.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace portkit::sql {
namespace {
namespace fs = std::filesystem;

class SqliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/portkit_sqlite_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

const Schema kV2{"test store",
                 2,
                 "CREATE TABLE t (a INTEGER, b TEXT); CREATE TABLE extra (x);",
                 {"CREATE TABLE extra (x);"},
                 "delete it and start again"};

TEST_F(SqliteTest, CreatesTheSchemaInANewFile) {
  auto db = Database::Open(dir_ / "a.db");
  ASSERT_TRUE(db.ok()) << db.status().message();
  ASSERT_TRUE(EnsureSchema(*db, kV2).ok());
  EXPECT_EQ(*db->UserVersion(), 2);
  auto st = db->Prepare("INSERT INTO t VALUES (?, ?)");
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(st->Bind(1, int64_t{42}).Bind(2, "forty-two").Run().ok());
  auto q = db->Prepare("SELECT a, b FROM t");
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(*q->Step());
  EXPECT_EQ(q->Int(0), 42);
  EXPECT_EQ(q->Text(1), "forty-two");
  EXPECT_FALSE(*q->Step());
}

TEST_F(SqliteTest, MigratesAnOlderSchema) {
  {
    auto db = Database::Open(dir_ / "a.db");
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("CREATE TABLE t (a INTEGER, b TEXT); PRAGMA user_version = 1;").ok());
  }
  auto db = Database::Open(dir_ / "a.db");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(EnsureSchema(*db, kV2).ok());
  EXPECT_EQ(*db->UserVersion(), 2);
  EXPECT_TRUE(db->Exec("INSERT INTO extra VALUES (1)").ok());
}

TEST_F(SqliteTest, RefusesAStoreWithoutAVersion) {
  auto db = Database::Open(dir_ / "a.db");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db->Exec("CREATE TABLE old (a)").ok());
  Status st = EnsureSchema(*db, kV2);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported);
  EXPECT_EQ(st.message(), (dir_ / "a.db").string() +
                              ": a test store without a schema version (written by an older portkit, or not by "
                              "portkit); this portkit reads schema 2; delete it and start again");
}

TEST_F(SqliteTest, RefusesANewerSchemaAndAnUnmigratableOlderOne) {
  auto db = Database::Open(dir_ / "a.db");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db->Exec("CREATE TABLE t (a); PRAGMA user_version = 3;").ok());
  Status newer = EnsureSchema(*db, kV2);
  EXPECT_EQ(newer.code(), ErrorCode::kUnsupported);
  EXPECT_NE(newer.message().find("schema 3 is newer than this portkit reads (2); use a newer portkit"),
            std::string::npos);
  Schema v5{"test store", 5, "CREATE TABLE t (a);", {"SELECT 1;"}, "re-create it"};
  Status older = EnsureSchema(*db, v5);
  EXPECT_EQ(older.code(), ErrorCode::kUnsupported);
  EXPECT_NE(older.message().find("schema 3 is older than this portkit reads (5); re-create it"), std::string::npos);
}

TEST_F(SqliteTest, TransactionRollsBackUnlessCommitted) {
  auto db = Database::Open(dir_ / "a.db");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(EnsureSchema(*db, kV2).ok());
  {
    Transaction tx(*db);
    ASSERT_TRUE(tx.status().ok());
    ASSERT_TRUE(db->Exec("INSERT INTO t VALUES (1, 'x')").ok());
  }  // no commit
  {
    Transaction tx(*db);
    ASSERT_TRUE(db->Exec("INSERT INTO t VALUES (2, 'y')").ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  auto q = db->Prepare("SELECT group_concat(a) FROM t");
  ASSERT_TRUE(*q->Step());
  EXPECT_EQ(q->Text(0), "2");
  // A failed statement inside a transaction still lets the next transaction begin.
  {
    Transaction tx(*db);
    EXPECT_FALSE(db->Exec("INSERT INTO nosuchtable VALUES (1)").ok());
  }
  Transaction again(*db);
  EXPECT_TRUE(again.status().ok()) << again.status().message();
}

TEST_F(SqliteTest, NotADatabaseIsAParseErrorNamingTheFile) {
  std::ofstream(dir_ / "junk.db") << "this is not sqlite at all, just text that is long enough to be read";
  auto db = Database::Open(dir_ / "junk.db");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), ErrorCode::kParse);
  EXPECT_EQ(db.status().message().rfind((dir_ / "junk.db").string() + ": not a SQLite database", 0), 0u);
}

TEST_F(SqliteTest, ReadOnlyDatabaseIsUsableForReading) {
  {
    auto db = Database::Open(dir_ / "a.db");
    ASSERT_TRUE(EnsureSchema(*db, kV2).ok());
  }
  auto ro = Database::Open(dir_ / "a.db", {.read_only = true});
  ASSERT_TRUE(ro.ok()) << ro.status().message();
  EXPECT_TRUE(EnsureSchema(*ro, kV2).ok());
  EXPECT_FALSE(ro->Exec("INSERT INTO t VALUES (1, 'x')").ok());
}

}  // namespace
}  // namespace portkit::sql

namespace portkit::sql {
namespace {

// Two processes creating one new store at once: one creates it, the other finds it made.
TEST(SqliteSchema, ConcurrentCreatorsBothSucceed) {
  char tmpl[] = "/tmp/portkit_sqlite_race_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::filesystem::path path = std::filesystem::path(tmpl) / "race.db";
  for (int round = 0; round < 10; ++round) {
    std::filesystem::remove(path);
    std::vector<pid_t> kids;
    for (int k = 0; k < 4; ++k) {
      pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        auto db = Database::Open(path);
        if (!db.ok()) {
          fprintf(stderr, "open: %s\n", db.status().message().c_str());
          _exit(1);
        }
        Status st = EnsureSchema(*db, kV2);
        if (!st.ok()) fprintf(stderr, "schema: %s\n", st.message().c_str());
        _exit(st.ok() ? 0 : 1);
      }
      kids.push_back(pid);
    }
    for (pid_t pid : kids) {
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
    }
  }
  std::filesystem::remove_all(tmpl);
}

// ---- Hostile databases (docs/safety.md, "SQLite inputs") -------------------------------------

constexpr std::string_view kOwnSql = "CREATE TABLE t (a INTEGER NOT NULL, b TEXT); CREATE VIEW v AS SELECT a FROM t;";

TEST_F(SqliteTest, TheToolsOwnSchemaPasses) {
  auto db = Database::Open(dir_ / "own.db");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db->Exec(kOwnSql).ok());
  EXPECT_TRUE(CheckOwnSchema(*db, "test store", kOwnSql, "").ok());
}

TEST_F(SqliteTest, ATriggerAForeignViewTableOrColumnIsRefusedNamingIt) {
  struct Case {
    std::string_view edit, message;
  };
  const Case cases[] = {
      {"CREATE TRIGGER spy AFTER INSERT ON t BEGIN DELETE FROM t; END;",
       "it holds a trigger 'spy' on 't' (SQL that would run on portkit's own writes), which a test store never has"},
      {"DROP VIEW v; CREATE VIEW v AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i AS a "
       "FROM n;",
       "the view 'v' is not a test store's own (its SQL differs)"},
      {"CREATE TABLE extra (x);", "it holds a table 'extra' that a test store does not have"},
      {"ALTER TABLE t ADD COLUMN c;", "table 't' has the columns (a, b, c) where a test store has (a, b)"},
      {"ALTER TABLE t RENAME TO t2; DROP VIEW v; CREATE VIEW t AS SELECT 1 AS a, 'x' AS b; CREATE VIEW v AS SELECT a "
       "FROM t;",
       "'t' is a view where a test store has a table"},
  };
  int i = 0;
  for (const auto& c : cases) {
    fs::path path = dir_ / ("case" + std::to_string(i++) + ".db");
    auto db = Database::Open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec(kOwnSql).ok());
    ASSERT_TRUE(db->Exec(c.edit).ok()) << c.edit;
    Status st = CheckOwnSchema(*db, "test store", kOwnSql, "delete it");
    EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << c.edit;
    EXPECT_EQ(st.message(), path.string() + ": not a test store as portkit writes it: " + std::string(c.message) +
                                "; refused, nothing in it was read or run; delete it");
  }
}

TEST_F(SqliteTest, EnsureSchemaChecksTheObjectsBeforeUse) {
  {
    auto db = Database::Open(dir_ / "a.db");
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(EnsureSchema(*db, kV2).ok());
    ASSERT_TRUE(db->Exec("CREATE TRIGGER spy AFTER INSERT ON t BEGIN DELETE FROM extra; END;").ok());
  }
  auto db = Database::Open(dir_ / "a.db", {.read_only = true});
  ASSERT_TRUE(db.ok());
  Status st = EnsureSchema(*db, kV2);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported);
  EXPECT_NE(st.message().find("holds a trigger 'spy'"), std::string::npos) << st.message();
}

TEST_F(SqliteTest, AValueOverTheLimitIsRefusedBeforeItIsLoaded) {
  {
    auto db = Database::Open(dir_ / "big.db");
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("CREATE TABLE t (s TEXT); INSERT INTO t VALUES (hex(zeroblob(1048576)));").ok());
  }
  auto db = Database::Open(dir_ / "big.db",
                           {.read_only = true, .max_value_bytes = 65536, .limit_remedy = "--max-string-mb raises it"});
  ASSERT_TRUE(db.ok());
  auto q = db->Prepare("SELECT s FROM t");
  ASSERT_TRUE(q.ok());
  auto row = q->Step();
  ASSERT_FALSE(row.ok());
  EXPECT_EQ(row.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(row.status().message(), (dir_ / "big.db").string() +
                                        ": statement failed: over the limit: a string or blob longer than the limit "
                                        "of 65536 bytes; not read. --max-string-mb raises it");
}

TEST_F(SqliteTest, ResultCodesAreSaidHonestly) {
  EXPECT_EQ(DescribeResultCode(SQLITE_FULL),
            "the disk is full (no room for the database or its journal; free some space and run again)");
  EXPECT_EQ(DescribeResultCode(SQLITE_IOERR_WRITE), "an input/output error of the file system");
  EXPECT_EQ(DescribeResultCode(SQLITE_READONLY_DBMOVED),
            "cannot be written (permission denied, or a read-only file system)");
  EXPECT_EQ(DescribeResultCode(SQLITE_NOTADB), "not a SQLite database, or a damaged one");
  EXPECT_EQ(ErrorCodeForResult(SQLITE_CORRUPT), ErrorCode::kParse);
  EXPECT_EQ(ErrorCodeForResult(SQLITE_FULL), ErrorCode::kIo);
  EXPECT_EQ(ErrorCodeForResult(SQLITE_TOOBIG), ErrorCode::kInvalidArgument);
}

TEST_F(SqliteTest, AFileThatIsNotSqliteIsStillSaidToBeSo) {
  {
    std::ofstream f(dir_ / "junk.db", std::ios::binary);
    f << std::string(4096, 'j');
  }
  auto db = Database::Open(dir_ / "junk.db", {.read_only = true});
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), ErrorCode::kParse);
  EXPECT_EQ(db.status().message(),
            (dir_ / "junk.db").string() + ": not a SQLite database, or a damaged one (file is not a database)");
}

}  // namespace
}  // namespace portkit::sql
