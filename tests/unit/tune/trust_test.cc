// Honest accounting and safe failure, in process on the recorded landscape (replay: deterministic):
// seed 004's counting under REPEAT_TUNE, a poisoned bank entry (THREADS=9999, 0.001 us) never used
// nor beating the measured entry, imported entries marked and kept below measured ones, the
// result reported as tuning proceeds, a failing progress write failing the run, a lookup-only
// run on a bank opened read-only, and the significance rule.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/sqlite.h"
#include "tune/api.h"
#include "tune/tuner.h"

namespace portkit::tune {
namespace {
namespace fs = std::filesystem;

class TrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_tune_trust_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    options_.replay = std::string(PORTKIT_TUNE_TEST_DATA) + "/landscape_small.jsonl";
    options_.bank = dir_ / "bank";
    options_.strategy = "exhaustive";
    options_.max_evals = 1000;
    options_.patience = 0;
  }
  void TearDown() override { fs::remove_all(dir_); }

  Expected<TuneReport> Run(const TuneOptions& o) {
    Context ctx{logger_, SystemClock(), fs::path(), 1, true};
    return RunTune(o, ctx);
  }
  std::vector<BankEntry> Entries() {
    auto kb = KnowledgeBase::Open(options_.bank, BankAccess::kReadOnly);
    EXPECT_TRUE(kb.ok()) << kb.status().message();
    auto list = kb->List();
    EXPECT_TRUE(list.ok());
    return *list;
  }

  fs::path dir_;
  TuneOptions options_;
  Logger logger_{nullptr, SystemClock()};
};

TEST_F(TrustTest, RepeatTuneCountsEveryFoundOperatorAsAHit) {
  auto first = Run(options_);
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_EQ(first->accounting.add, 2);
  TuneOptions again = options_;
  again.repeat_tune = true;
  auto second = Run(again);
  ASSERT_TRUE(second.ok()) << second.status().message();
  const RepoAccounting& a = second->accounting;
  EXPECT_EQ(a.hit, 2);                      // both found in the bank
  EXPECT_EQ(a.reserved + a.update, a.hit);  // each re-tuned hit ends as one of them
  EXPECT_EQ(a.add, 0);
  EXPECT_EQ(a.total(), a.add + a.hit + a.unsatisfied);
  EXPECT_EQ(a.total(), 2);
  for (const auto& op : second->session.ops) EXPECT_TRUE(op.bank_hit);
}

TEST_F(TrustTest, APoisonedEntryIsNeverAHitAndIsReplaced) {
  auto first = Run(options_);
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::vector<BankEntry> measured = Entries();
  ASSERT_EQ(measured.size(), 2u);

  // Imported: THREADS=9999 is refused; a valid configuration with a tiny time does not beat the
  // measured entry (it is not this machine's time).
  BankEntry poison = measured[0];
  poison.config = poison.config.substr(0, poison.config.rfind("THREADS=")) + "THREADS=9999";
  poison.time_us = 0.001;
  BankEntry fast = measured[0];
  fast.config = fast.config.find("UNROLL=1") != std::string::npos
                    ? fast.config.replace(fast.config.find("UNROLL=1"), 8, "UNROLL=4")
                    : fast.config.replace(fast.config.find("UNROLL=4"), 8, "UNROLL=1");
  fast.time_us = 0.02;
  ASSERT_TRUE(WriteFileAtomic(dir_ / "poison.json", EntriesToJson({poison, fast})).ok());
  auto imported = RunBankImport(options_.bank, dir_ / "poison.json");
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->added + imported->updated, 0);
  EXPECT_EQ(imported->kept, 1);
  ASSERT_EQ(imported->rejected.size(), 1u);
  EXPECT_NE(imported->rejected[0].find("THREADS"), std::string::npos) << imported->rejected[0];
  std::vector<BankEntry> after = Entries();
  ASSERT_EQ(after.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(after[i].config, measured[i].config);
    EXPECT_EQ(after[i].time_us, measured[i].time_us);
    EXPECT_TRUE(after[i].measured_here);
  }
  auto hits = Run(options_);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->accounting.hit, 2);
  for (const auto& op : hits->session.ops) EXPECT_EQ(op.config.find("9999"), std::string::npos);

  // Poisoned in the database itself: found, refused, re-tuned (not a hit), replaced; even under
  // REPEAT_TUNE it is never the incumbent.
  for (bool repeat : {false, true}) {
    SCOPED_TRACE(repeat ? "repeat tune" : "plain");
    {
      auto db = sql::Database::Open(BankDatabasePath(options_.bank));
      ASSERT_TRUE(db.ok());
      ASSERT_TRUE(db->Exec("UPDATE entries SET config = substr(config, 1, instr(config, 'THREADS=') - 1) || "
                           "'THREADS=9999', time_us = 0.001")
                      .ok());
    }
    TuneOptions o = options_;
    o.repeat_tune = repeat;
    auto run = Run(o);
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_EQ(run->accounting.hit, 0);
    EXPECT_EQ(run->accounting.add, 2);
    for (const auto& op : run->session.ops) {
      EXPECT_EQ(op.config.find("9999"), std::string::npos) << op.config;
      EXPECT_EQ(op.source, "tuned");
    }
    std::vector<BankEntry> healed = Entries();
    ASSERT_EQ(healed.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(healed[i].config, measured[i].config);  // the recorded optimum again
      EXPECT_GT(healed[i].time_us, 0.5);
    }
  }
}

TEST_F(TrustTest, ImportedEntriesAreHitsMarkedNotMeasuredUntilRepeatTuneMeasuresThem) {
  auto first = Run(options_);
  ASSERT_TRUE(first.ok());
  std::vector<BankEntry> measured = Entries();
  ASSERT_TRUE(WriteFileAtomic(dir_ / "shared.json", EntriesToJson(measured)).ok());
  TuneOptions o = options_;
  o.bank = dir_ / "bank2";
  ASSERT_TRUE(RunBankImport(o.bank, dir_ / "shared.json").ok());
  auto kb = KnowledgeBase::Open(o.bank, BankAccess::kReadOnly);
  ASSERT_TRUE(kb.ok());
  for (const auto& e : *kb->List()) EXPECT_FALSE(e.measured_here);
  auto hit = Run(o);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->accounting.hit, 2);
  for (const auto& op : hit->session.ops) EXPECT_FALSE(op.measured_here);
  o.repeat_tune = true;
  auto again = Run(o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->accounting.hit, 2);
  auto kb2 = KnowledgeBase::Open(o.bank, BankAccess::kReadOnly);
  ASSERT_TRUE(kb2.ok());
  for (const auto& e : *kb2->List()) EXPECT_TRUE(e.measured_here) << e.op_key;
}

TEST_F(TrustTest, ProgressIsReportedPerOperatorAndAFailedWriteFailsTheRun) {
  std::vector<size_t> seen;
  TuneOptions o = options_;
  o.on_progress = [&](const SessionResult& r) {
    seen.push_back(r.ops.size());
    return Status::Ok();
  };
  ASSERT_TRUE(Run(o).ok());
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2}));
  int calls = 0;
  o.bank = dir_ / "bank_fail";
  o.on_progress = [&](const SessionResult&) {
    return ++calls == 2 ? IoError("result.json: No space left on device") : Status::Ok();
  };
  auto failed = Run(o);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), ErrorCode::kInternal);  // exit 4, not a result
  EXPECT_EQ(failed.status().message(), "run failed: result.json: No space left on device");
}

TEST_F(TrustTest, ALookupOnlyRunUsesABankOpenedReadOnly) {
  ASSERT_TRUE(Run(options_).ok());
  TuneOptions o = options_;
  o.lookup_only = true;
  auto db = BankDatabasePath(options_.bank);
  auto before = fs::last_write_time(db);
  auto run = Run(o);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->accounting.hit, 2);
  EXPECT_EQ(fs::last_write_time(db), before);
  o.bank = dir_ / "empty_bank";
  ASSERT_TRUE(KnowledgeBase::Open(o.bank).ok());
  auto none = Run(o);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->accounting.total(), 0);
  ASSERT_EQ(none->session.untuned.size(), 2u);
  EXPECT_EQ(none->session.untuned[0].reason, "not in the knowledge base (lookup only)");
}

// A landscape write that hits the file-size limit (SIGXFSZ ignored: the write fails with EFBIG)
// is reported, in a forked child so that the limit stays there.
TEST(LandscapeStreamTest, AWriteFailureIsReported) {
  fs::path file = fs::temp_directory_path() / ("portkit_landscape_full_" + std::to_string(getpid()) + ".jsonl");
  fs::remove(file);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {4096, 4096};
    setrlimit(RLIMIT_FSIZE, &lim);
    Landscape l;
    l.validators = "cpu=x;cores=2";
    if (!l.StreamTo(file).ok()) _exit(10);
    for (int i = 0; i < 200 && l.stream_error().empty(); ++i) l.Add("MatMul|x", "K=" + std::to_string(i), {"ok", 1.5});
    _exit(l.stream_error().find("cannot write the landscape") == 0 ? 0 : 11);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  fs::remove(file);
}

TEST(SignificanceTest, NoiseIsNotAGain) {
  // Interleaved pairs where the candidate is 0.5 % faster: below the minimum gain.
  std::vector<double> inc = {10.0, 10.1, 9.9, 10.0, 10.2, 10.0, 9.95};
  std::vector<double> cand;
  for (double x : inc) cand.push_back(x * 0.995);
  EXPECT_FALSE(CompareSamples(cand, inc).significant);
  // 20 % faster in every pair: significant; the bound is the 2nd smallest ratio of 7.
  cand.clear();
  for (double x : inc) cand.push_back(x / 1.2);
  Comparison c = CompareSamples(cand, inc);
  EXPECT_TRUE(c.significant);
  EXPECT_NEAR(c.lower_bound, 1.2, 1e-9);
  // 20 % faster in the median, but two pairs slower: the lower bound is below 1.
  cand[1] = inc[1] * 1.5;
  cand[4] = inc[4] * 1.3;
  EXPECT_FALSE(CompareSamples(cand, inc).significant);
  // One value each (a replayed landscape): the margin alone.
  EXPECT_FALSE(CompareSamples({0.0300}, {0.0301}).significant);
  EXPECT_TRUE(CompareSamples({0.025}, {0.030}).significant);
}

}  // namespace
}  // namespace portkit::tune
