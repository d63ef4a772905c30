#include "tune/knowledge_base.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>

#include <chrono>
#include <fstream>
#include <thread>

#include "core/sqlite.h"
#include "tune/builder.h"
#include "tune/operators/operator.h"

namespace portkit::tune {
namespace {
namespace fs = std::filesystem;

class KnowledgeBaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_kb_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

BankEntry Entry(const std::string& key, const std::string& config, double us) {
  return {key, "cpu=test;cores=2", "MatMul", "fc", config, us, 100.0, "2026-01-01T00:00:00Z"};
}

std::string IntegrityCheck(const fs::path& db_path) {
  auto db = sql::Database::Open(db_path, {.read_only = true});
  if (!db.ok()) return db.status().message();
  auto st = db->Prepare("PRAGMA integrity_check");
  if (!st.ok()) return st.status().message();
  auto row = st->Step();
  return row.ok() && *row ? std::string(st->Text(0)) : "no result";
}

int UserVersion(const fs::path& db_path) {
  auto db = sql::Database::Open(db_path, {.read_only = true});
  if (!db.ok()) return -1;
  auto v = db->UserVersion();
  return v.ok() ? *v : -1;
}

TEST_F(KnowledgeBaseTest, StoresOnlyWhatIsFaster) {
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_TRUE(kb.ok()) << kb.status().message();
  auto miss = kb->Lookup("op", "cpu=test;cores=2");
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  EXPECT_EQ(*kb->StoreIfBetter(Entry("op", "A=1", 10)), StoreOutcome::kAdded);
  EXPECT_EQ(*kb->StoreIfBetter(Entry("op", "A=2", 12)), StoreOutcome::kKept);
  EXPECT_EQ(*kb->StoreIfBetter(Entry("op", "A=3", 10)), StoreOutcome::kKept);  // equal is not better
  EXPECT_EQ(*kb->StoreIfBetter(Entry("op", "A=4", 9)), StoreOutcome::kUpdated);
  // Compared with the stored strategy re-measured now (11 us) rather than its old 9 us.
  EXPECT_EQ(*kb->StoreIfBetter(Entry("op", "A=5", 10), "A=4", 11.0), StoreOutcome::kUpdated);
  auto hit = kb->Lookup("op", "cpu=test;cores=2");
  ASSERT_TRUE(hit.ok() && hit->has_value());
  EXPECT_EQ((*hit)->config, "A=5");
  EXPECT_EQ((*hit)->time_us, 10);
  // Other validators (another machine or compiler) are another entry.
  auto other = kb->Lookup("op", "cpu=other;cores=2");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
}

TEST_F(KnowledgeBaseTest, ExportImportRoundTrip) {
  auto kb = KnowledgeBase::Open(dir_ / "a");
  ASSERT_TRUE(kb.ok());
  ASSERT_TRUE(kb->StoreIfBetter(Entry("op1", "A=1", 5)).ok());
  ASSERT_TRUE(kb->StoreIfBetter(Entry("op2", "A=2", 7)).ok());
  std::string json = EntriesToJson(*kb->List());
  auto entries = EntriesFromJson(json, "bank.json");
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[1].config, "A=2");
  EXPECT_EQ((*entries)[1].time_us, 7);
  EXPECT_EQ(EntriesFromJson("{\"entries\": [{\"op_key\": 1}]}", "bank.json").status().message(),
            "bank.json: entries[0].op_key: missing or not a string");
  EXPECT_EQ(EntriesFromJson("{}", "bank.json").status().message(), "bank.json: entries: missing or not an array");
}

TEST_F(KnowledgeBaseTest, OpenNamesAnUnusablePath) {
  fs::create_directories(dir_);
  { std::ofstream(dir_ / "file") << "x"; }
  auto kb = KnowledgeBase::Open(dir_ / "file");
  ASSERT_FALSE(kb.ok());
  EXPECT_NE(kb.status().message().find((dir_ / "file").string()), std::string::npos) << kb.status().message();
}

// Two processes writing the same keys at once: every write is a transaction, the second waits
// for the first (busy timeout), and each key ends with the fastest time either wrote.
TEST_F(KnowledgeBaseTest, TwoConcurrentWritersNeverCorruptIt) {
  ASSERT_TRUE(KnowledgeBase::Open(dir_).ok());
  const int kKeys = 40, kRounds = 3;
  pid_t children[2];
  for (int w = 0; w < 2; ++w) {
    children[w] = fork();
    ASSERT_GE(children[w], 0);
    if (children[w] == 0) {
      auto kb = KnowledgeBase::Open(dir_);
      if (!kb.ok()) _exit(3);
      for (int r = 0; r < kRounds; ++r)
        for (int k = 0; k < kKeys; ++k) {
          // Writer w's times for key k: distinct per writer and round; the minimum is known.
          double us = 100.0 + ((k * 7 + w * 13 + r * 5) % 31);
          if (!kb->StoreIfBetter(Entry("op" + std::to_string(k), "W=" + std::to_string(w), us)).ok()) _exit(4);
        }
      _exit(0);
    }
  }
  for (pid_t c : children) {
    int status = 0;
    waitpid(c, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  EXPECT_EQ(IntegrityCheck(dir_ / "tune_bank.db"), "ok");
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_TRUE(kb.ok());
  auto entries = kb->List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), static_cast<size_t>(kKeys));
  for (int k = 0; k < kKeys; ++k) {
    double best = 1e9;
    for (int w = 0; w < 2; ++w)
      for (int r = 0; r < kRounds; ++r) best = std::min(best, 100.0 + ((k * 7 + w * 13 + r * 5) % 31));
    auto e = kb->Lookup("op" + std::to_string(k), "cpu=test;cores=2");
    ASSERT_TRUE(e.ok() && e->has_value());
    EXPECT_EQ((*e)->time_us, best) << k;
  }
}

// Tuners that create the same new bank at the same moment (switching it to WAL and creating the
// schema race): all of them open it and write.
TEST_F(KnowledgeBaseTest, ConcurrentCreationOfANewBank) {
  const int kProcs = 8;
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t children[kProcs];
  for (int p = 0; p < kProcs; ++p) {
    children[p] = fork();
    ASSERT_GE(children[p], 0);
    if (children[p] == 0) {
      close(go[1]);
      char c;
      (void)!read(go[0], &c, 1);  // all start together when the parent closes the pipe
      auto kb = KnowledgeBase::Open(dir_);
      if (!kb.ok()) {
        std::fprintf(stderr, "process %d: %s\n", p, kb.status().message().c_str());
        _exit(3);
      }
      if (auto stored = kb->StoreIfBetter(Entry("op" + std::to_string(p), "A=1", 1)); !stored.ok()) {
        std::fprintf(stderr, "process %d: %s\n", p, stored.status().message().c_str());
        _exit(4);
      }
      _exit(0);
    }
  }
  close(go[0]);
  close(go[1]);
  for (pid_t c : children) {
    int status = 0;
    waitpid(c, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << WEXITSTATUS(status);
  }
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_TRUE(kb.ok());
  EXPECT_EQ(kb->List()->size(), static_cast<size_t>(kProcs));
  EXPECT_EQ(IntegrityCheck(dir_ / "tune_bank.db"), "ok");
}

// A writer killed with SIGKILL in the middle of its writes: the bank opens, passes SQLite's
// integrity check, and holds only whole entries.
TEST_F(KnowledgeBaseTest, SigkilledWriterLeavesItConsistent) {
  ASSERT_TRUE(KnowledgeBase::Open(dir_).ok());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto kb = KnowledgeBase::Open(dir_);
    if (!kb.ok()) _exit(3);
    for (long i = 0;; ++i) {
      (void)kb->StoreIfBetter(
          Entry("op" + std::to_string(i % 500), std::string(200, 'x'), 1e6 - static_cast<double>(i)));
      if (i == 50) (void)!write(ready[1], "r", 1);
    }
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  close(ready[0]);
  close(ready[1]);
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_TRUE(kb.ok()) << kb.status().message();
  EXPECT_EQ(IntegrityCheck(dir_ / "tune_bank.db"), "ok");
  auto entries = kb->List();
  ASSERT_TRUE(entries.ok());
  EXPECT_GE(entries->size(), 50u);
  for (const auto& e : *entries) {
    EXPECT_EQ(e.config.size(), 200u);
    EXPECT_GT(e.time_us, 0);
  }
  // And it still takes writes.
  EXPECT_EQ(*kb->StoreIfBetter(Entry("after", "A=1", 1)), StoreOutcome::kAdded);
}

// ---- Schema version and key ------------------------------------------------------------------

// The bank as portkit wrote it before schema versions: the same table, user_version 0, keyed by
// validators that ended in the portkit version.
void WriteUnversionedBank(const fs::path& db_path, const std::vector<std::pair<std::string, std::string>>& rows) {
  fs::create_directories(db_path.parent_path());
  auto db = sql::Database::Open(db_path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  ASSERT_TRUE(
      db->Exec("CREATE TABLE IF NOT EXISTS entries (op_key TEXT NOT NULL, validators TEXT NOT NULL, op_type TEXT "
               "NOT NULL, op_name TEXT NOT NULL, config TEXT NOT NULL, time_us REAL NOT NULL, default_us REAL "
               "NOT NULL, updated TEXT NOT NULL, PRIMARY KEY (op_key, validators))")
          .ok());
  for (const auto& [op_key, validators] : rows) {
    auto st = db->Prepare("INSERT INTO entries VALUES (?1, ?2, 'MatMul', 'fc', 'A=1', 5, 10, '2026-01-01T00:00:00Z')");
    ASSERT_TRUE(st.ok());
    ASSERT_TRUE(st->Bind(1, op_key).Bind(2, validators).Run().ok());
  }
}

std::string JoinedDefaultFlags() {
  std::string out;
  for (const auto& f : BuildOptions{}.flags) out += (out.empty() ? "" : " ") + f;
  return out;
}

TEST_F(KnowledgeBaseTest, ANewBankCarriesTheSchemaVersion) {
  ASSERT_TRUE(KnowledgeBase::Open(dir_).ok());
  EXPECT_EQ(UserVersion(dir_ / "tune_bank.db"), kBankSchemaVersion);
}

TEST_F(KnowledgeBaseTest, ANewerSchemaIsRefusedWithWhatToDo) {
  ASSERT_TRUE(KnowledgeBase::Open(dir_).ok());
  {
    auto db = sql::Database::Open(dir_ / "tune_bank.db");
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->SetUserVersion(kBankSchemaVersion + 1).ok());
  }
  for (BankAccess access : {BankAccess::kReadWrite, BankAccess::kReadOnly}) {
    auto kb = KnowledgeBase::Open(dir_, access);
    ASSERT_FALSE(kb.ok());
    EXPECT_EQ(kb.status().code(), ErrorCode::kUnsupported);
    const std::string& m = kb.status().message();
    EXPECT_EQ(
        m.rfind((dir_ / "tune_bank.db").string() + ": tuning bank schema " + std::to_string(kBankSchemaVersion + 1) +
                    " is newer than this portkit reads (" + std::to_string(kBankSchemaVersion) +
                    "); use a newer portkit; give another --tune-bank folder",
                0),
        0u)
        << m;
  }
  EXPECT_EQ(UserVersion(dir_ / "tune_bank.db"), kBankSchemaVersion + 1);  // left alone
}

TEST_F(KnowledgeBaseTest, AnotherDatabaseWithoutAVersionIsRefused) {
  fs::create_directories(dir_);
  {
    auto db = sql::Database::Open(dir_ / "tune_bank.db");
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("CREATE TABLE something_else (x INTEGER)").ok());
  }
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_FALSE(kb.ok());
  EXPECT_EQ(kb.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(kb.status().message().find("a tuning bank without a schema version"), std::string::npos)
      << kb.status().message();
  EXPECT_NE(kb.status().message().find("move the file away and tune again"), std::string::npos);
}

// A bank written before schema versions: entries of this portkit version are re-keyed (the same
// templates and flags measured them), entries of other versions keep their old key (no lookup
// matches them; they stay listed).
TEST_F(KnowledgeBaseTest, AnUnversionedBankIsMigratedOnOpenForWriting) {
  const std::string machine = "cpu=Test CPU;flags=avx2 fma;cores=2;compiler=c++ 12.2.0";
  const std::string same = machine + ";portkit=" + PORTKIT_VERSION_STRING;
  const std::string older = machine + ";portkit=0.0.1-old";
  WriteUnversionedBank(dir_ / "tune_bank.db", {{"op", same}, {"op", older}});

  // Read-only: listed as it is, and not changed.
  auto ro = KnowledgeBase::Open(dir_, BankAccess::kReadOnly);
  ASSERT_TRUE(ro.ok()) << ro.status().message();
  EXPECT_EQ(ro->schema_version(), 0);
  EXPECT_EQ(ro->List()->size(), 2u);
  EXPECT_EQ(UserVersion(dir_ / "tune_bank.db"), 0);

  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_TRUE(kb.ok()) << kb.status().message();
  EXPECT_EQ(UserVersion(dir_ / "tune_bank.db"), kBankSchemaVersion);
  std::string key = BankValidators(machine + ";cxxflags=" + JoinedDefaultFlags(), KernelTemplateHash("MatMul"));
  auto hit = kb->Lookup("op", key);
  ASSERT_TRUE(hit.ok());
  ASSERT_TRUE(hit->has_value()) << key;
  EXPECT_EQ((*hit)->config, "A=1");
  auto old = kb->Lookup("op", older);
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->has_value());
  EXPECT_EQ(kb->List()->size(), 2u);
  // Opening again is a no-op.
  ASSERT_TRUE(KnowledgeBase::Open(dir_).ok());
  EXPECT_EQ(KnowledgeBase::Open(dir_)->List()->size(), 2u);
}

TEST_F(KnowledgeBaseTest, ReadOnlyOpenNeedsAnExistingBankAndNeverCreatesOne) {
  auto kb = KnowledgeBase::Open(dir_, BankAccess::kReadOnly);
  ASSERT_FALSE(kb.ok());
  EXPECT_EQ(kb.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(kb.status().message().rfind("no tuning bank at " + (dir_ / "tune_bank.db").string(), 0), 0u);
  EXPECT_FALSE(fs::exists(dir_));
  // A file that is not SQLite.
  fs::create_directories(dir_);
  { std::ofstream(dir_ / "tune_bank.db") << std::string(4096, '\x7f'); }
  auto corrupt = KnowledgeBase::Open(dir_, BankAccess::kReadOnly);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.status().code(), ErrorCode::kParse) << corrupt.status().message();
}

TEST_F(KnowledgeBaseTest, ADatabaseFileCanBeGivenInsteadOfAFolder) {
  ASSERT_TRUE(KnowledgeBase::Open(dir_).ok());
  auto kb = KnowledgeBase::Open(dir_ / "tune_bank.db", BankAccess::kReadOnly);
  ASSERT_TRUE(kb.ok()) << kb.status().message();
  EXPECT_EQ(kb->path(), dir_ / "tune_bank.db");
}

// The key holds what determines a kernel's behaviour and nothing else: no portkit version (a
// recording's old `portkit=` field is dropped), but the template, the flags, the compiler and
// the CPU.
TEST(BankKeyTest, DependsOnTheKernelNotOnThePortkitVersion) {
  std::string h = KernelTemplateHash("MatMul");
  ASSERT_EQ(h.size(), 16u);
  EXPECT_EQ(KernelTemplateHash("MatMul"), h);  // deterministic
  EXPECT_NE(KernelTemplateHash("Conv2D"), h);
  EXPECT_EQ(KernelTemplateHash("Relu"), "");
  std::string m = MachineValidators("c++ 12.2.0", {"-O3", "-march=native"});
  EXPECT_EQ(m.find("portkit"), std::string::npos) << m;
  EXPECT_NE(m.find(";compiler=c++ 12.2.0;cxxflags=-O3 -march=native"), std::string::npos) << m;
  EXPECT_EQ(m.rfind(CpuDescription(), 0), 0u);
  EXPECT_EQ(BankValidators("cpu=x;cores=2;compiler=c;portkit=0.1.0", h), BankValidators("cpu=x;cores=2;compiler=c", h));
  EXPECT_EQ(BankValidators("cpu=x;cores=2;compiler=c;portkit=0.1.0", h),
            BankValidators("cpu=x;cores=2;compiler=c;portkit=7.0.0", h));
  EXPECT_EQ(BankValidators("cpu=x;cores=2", h), "cpu=x;cores=2;template=" + h);
  EXPECT_NE(BankValidators(m, h), BankValidators(MachineValidators("c++ 13.1.0", {"-O3", "-march=native"}), h));
  EXPECT_NE(BankValidators(m, h), BankValidators(MachineValidators("c++ 12.2.0", {"-O2", "-march=native"}), h));
}

// ---- A bank portkit did not write (docs/safety.md, "SQLite inputs") ---------------------------

TEST_F(KnowledgeBaseTest, ARecursiveViewAsEntriesIsRefusedAtOnce) {
  {
    auto kb = KnowledgeBase::Open(dir_);
    ASSERT_TRUE(kb.ok());
    ASSERT_TRUE(kb->StoreIfBetter(Entry("MatMul|a", "MC=48", 5.0)).ok());
  }
  {
    auto db = sql::Database::Open(dir_ / "tune_bank.db");
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("ALTER TABLE entries RENAME TO kept; CREATE VIEW entries AS WITH RECURSIVE n(i) AS "
                         "(SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT 'k' || i AS op_key, 'v' AS validators, "
                         "'MatMul' AS op_type, 'x' AS op_name, 'c' AS config, 1.0 AS time_us, 2.0 AS default_us, "
                         "'u' AS updated, 1 AS measured_here FROM n;")
                    .ok());
  }
  const auto start = std::chrono::steady_clock::now();
  for (auto access : {BankAccess::kReadOnly, BankAccess::kReadWrite}) {
    auto kb = KnowledgeBase::Open(dir_, access);
    ASSERT_FALSE(kb.ok());
    EXPECT_EQ(kb.status().code(), ErrorCode::kUnsupported);
    EXPECT_NE(kb.status().message().find((dir_ / "tune_bank.db").string() +
                                         ": not a tuning bank as portkit writes it: 'entries' is a view where a "
                                         "tuning bank has a table"),
              std::string::npos)
        << kb.status().message();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(KnowledgeBaseTest, ATriggerIsRefusedBeforeTheToolWrites) {
  {
    auto kb = KnowledgeBase::Open(dir_);
    ASSERT_TRUE(kb.ok());
    ASSERT_TRUE(kb->StoreIfBetter(Entry("MatMul|a", "MC=48", 5.0)).ok());
  }
  {
    auto db = sql::Database::Open(dir_ / "tune_bank.db");
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(
        db->Exec("CREATE TRIGGER zap AFTER INSERT ON entries BEGIN UPDATE entries SET config = 'PWNED'; END;").ok());
  }
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_FALSE(kb.ok());
  EXPECT_NE(kb.status().message().find("holds a trigger 'zap' on 'entries'"), std::string::npos)
      << kb.status().message();
}

TEST_F(KnowledgeBaseTest, ListLeavesOutTimesOutOfRangeAndStringsOverTheLimit) {
  {
    auto kb = KnowledgeBase::Open(dir_, BankAccess::kReadWrite, int64_t{8} << 20);
    ASSERT_TRUE(kb.ok());
    ASSERT_TRUE(kb->StoreIfBetter(Entry("MatMul|good", "MC=48", 5.0)).ok());
    BankEntry huge_default = Entry("MatMul|huge", "MC=48", 5.0);
    huge_default.default_us = 1e308;
    ASSERT_TRUE(kb->StoreIfBetter(huge_default).ok());
    ASSERT_TRUE(kb->StoreIfBetter(Entry("MatMul|long", std::string(3 << 20, 'x'), 5.0)).ok());
  }
  auto kb = KnowledgeBase::Open(dir_, BankAccess::kReadOnly);
  ASSERT_TRUE(kb.ok()) << kb.status().message();
  std::vector<std::string> left_out;
  auto entries = kb->List(&left_out);
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].op_key, "MatMul|good");
  ASSERT_EQ(left_out.size(), 2u);
  const std::string db = (dir_ / "tune_bank.db").string();
  EXPECT_EQ(left_out[0], db + ": entry 2 left out: op_key 'MatMul|huge': default_us 1e+308 is out of range (a time "
                              "in microseconds, above 0 and at most 3.6e+09)");
  EXPECT_EQ(left_out[1], db + ": entry 3 left out: over the limit: a string or blob longer than the limit of 1 MiB; "
                              "not read. --max-string-mb raises the limit");
  // Raised, the long entry is read.
  auto raised = KnowledgeBase::Open(dir_, BankAccess::kReadOnly, int64_t{4} << 20);
  ASSERT_TRUE(raised.ok());
  auto all = raised->List();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
}

TEST_F(KnowledgeBaseTest, CheckEntryRefusesATimeAboveAnHour) {
  BankEntry e{"MatMul|float32|ND|[64,128],[128,96]|bias=1",
              "cpu=Example CPU;flags=avx2 fma;cores=2;compiler=c++ 12.2.0;cxxflags=-O3;template=0000000000000000",
              "MatMul",
              "fc1",
              "MC=48,NC=768,KC=128,MR=8,NR=48,VW=16,PACK_A=1,ORDER=1,UNROLL=4,THREADS=1",
              8.88,
              42.4,
              "2026-01-01T00:00:00Z"};
  EXPECT_EQ(CheckEntry(e, 0), "");
  e.default_us = 1e308;
  EXPECT_NE(CheckEntry(e, 0).find("default_us 1e+308"), std::string::npos) << CheckEntry(e, 0);
}

}  // namespace
}  // namespace portkit::tune
