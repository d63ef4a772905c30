#include "tune/knowledge_base.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

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
  sqlite3* db = nullptr;
  sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  std::string out = "no result";
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
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
      if (!kb.ok()) _exit(3);
      if (!kb->StoreIfBetter(Entry("op" + std::to_string(p), "A=1", 1)).ok()) _exit(4);
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
      (void)kb->StoreIfBetter(Entry("op" + std::to_string(i % 500), std::string(200, 'x'), 1e6 - static_cast<double>(i)));
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

}  // namespace
}  // namespace portkit::tune
