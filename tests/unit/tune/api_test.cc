// The tuning engine called as a library (RunTune, RunBank*), in process, on the recorded
// landscape (replay: no compiling): the report's data, the checks made before anything is read
// or created, and a bank key that survives a change of the portkit version.
#include "tune/api.h"

#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "render/tune_render.h"

namespace portkit::tune {
namespace {
namespace fs = std::filesystem;

class TuneApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_tune_api_test_" + std::to_string(getpid()) + "_" +
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

  fs::path dir_;
  TuneOptions options_;
  Logger logger_{nullptr, SystemClock()};
};

TEST_F(TuneApiTest, RunTuneReturnsTheReport) {
  auto first = Run(options_);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(first->replay);
  EXPECT_EQ(first->input, options_.replay.string());
  EXPECT_EQ(first->session.name, "landscape_small");
  EXPECT_EQ(first->session.strategy, "exhaustive");
  ASSERT_EQ(first->session.ops.size(), 2u);
  EXPECT_EQ(first->accounting.add, 2);
  EXPECT_EQ(first->accounting.total(), 2);
  EXPECT_EQ(first->accounting.hit + first->accounting.update + first->accounting.reserved, 0);
  EXPECT_EQ(first->accounting.untuned, 0);
  for (const auto& op : first->session.ops) {
    EXPECT_EQ(RepoStatusName(op.status), std::string("add"));
    EXPECT_LT(op.after_us, op.before_us);
    EXPECT_GT(op.evaluations, 0);
    EXPECT_FALSE(op.config.empty());
  }
  EXPECT_GT(first->totals.baseline_ms, first->totals.result_ms);
  EXPECT_TRUE(first->files_written.empty());  // a replay records no landscape
  EXPECT_TRUE(first->landscape.empty());
  EXPECT_GE(first->timings.total_seconds, first->timings.tune_seconds);
  EXPECT_EQ(first->session.bank_path, (dir_ / "bank" / "tune_bank.db").string());

  // Again: both are knowledge-base hits, tuned with nothing.
  auto second = Run(options_);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(second->accounting.hit, 2);
  EXPECT_EQ(second->accounting.add, 0);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(second->session.ops[i].config, first->session.ops[i].config);
    EXPECT_EQ(second->session.ops[i].source, "bank");
    EXPECT_EQ(second->session.ops[i].evaluations, 0);
  }

  // The bank, read back as data.
  auto listing = RunBankList(options_.bank);
  ASSERT_TRUE(listing.ok()) << listing.status().message();
  EXPECT_EQ(listing->schema_version, kBankSchemaVersion);
  ASSERT_EQ(listing->entries.size(), 2u);
  auto shown = RunBankShow(options_.bank, first->session.ops[0].op.name);
  ASSERT_TRUE(shown.ok());
  ASSERT_EQ(shown->entries.size(), 1u);
  EXPECT_EQ(shown->entries[0].config, first->session.ops[0].config);
  auto none = RunBankShow(options_.bank, "nosuchop");
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);

  // Export, then import into another bank: every entry added.
  ASSERT_TRUE(WriteFileAtomic(dir_ / "bank.json", EntriesToJson(RunBankExport(options_.bank)->entries)).ok());
  auto imported = RunBankImport(dir_ / "bank2", dir_ / "bank.json");
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->added, 2);
  EXPECT_EQ(imported->updated + imported->kept, 0);
}

TEST_F(TuneApiTest, TheReportJsonHoldsTheAccounting) {
  auto report = Run(options_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  report->files_written.push_back(dir_ / "tuned_plan.json");
  std::string json = render::TuneReportJson(*report);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(simdjson::padded_string(json)).get(root), simdjson::SUCCESS) << json;
  int64_t n = 0;
  ASSERT_FALSE(root["portkit_tune_report"].get_int64().get(n));
  EXPECT_EQ(n, 1);
  ASSERT_FALSE(root["accounting"]["add"].get_int64().get(n));
  EXPECT_EQ(n, 2);
  ASSERT_FALSE(root["accounting"]["total"].get_int64().get(n));
  EXPECT_EQ(n, 2);
  simdjson::dom::array ops, files;
  ASSERT_FALSE(root["operators"].get_array().get(ops));
  EXPECT_EQ(ops.size(), 2u);
  std::string_view status;
  ASSERT_FALSE(ops.at(0)["repo_status"].get_string().get(status));
  EXPECT_EQ(status, "add");
  ASSERT_FALSE(root["files_written"].get_array().get(files));
  EXPECT_EQ(files.size(), 1u);
  std::string_view validators;
  ASSERT_FALSE(root["bank"]["validators"].get_string().get(validators));
  EXPECT_NE(validators.find("cores=2"), std::string_view::npos);
}

// Bad options are refused before anything is read or created: no bank, whatever the input.
TEST_F(TuneApiTest, OptionsAreCheckedBeforeAnythingIsReadOrCreated) {
  struct Case {
    const char* what;
    void (*change)(TuneOptions&);
    const char* message_start;
  };
  const Case cases[] = {
      {"strategy", [](TuneOptions& o) { o.strategy = "nope"; }, "--strategy nope: unknown strategy (strategies: "},
      {"job type", [](TuneOptions& o) { o.job_type = 1; }, "--job-type=1: only operator tuning (2) is supported"},
      {"max evals", [](TuneOptions& o) { o.max_evals = 0; }, "--max-evals 0: give at least 1"},
      {"patience", [](TuneOptions& o) { o.patience = -3; }, "--patience -3: give 0 (never) or more"},
      {"repeats", [](TuneOptions& o) { o.repeats = 2; }, "--repeats 2: give 5 to 1000"},
      {"parallel", [](TuneOptions& o) { o.parallel_compile = 0; }, "--parallel-compile 0: give at least 1"},
      {"fix", [](TuneOptions& o) { o.fixes = {"BOGUS=1"}; }, "--fix BOGUS: unknown knob"},
      {"no input",
       [](TuneOptions& o) {
         o.replay.clear();
         o.model.clear();
       },
       "give --model FILE"},
  };
  for (const auto& c : cases) {
    TuneOptions o = options_;
    o.model = dir_ / "missing.json";  // never read
    c.change(o);
    auto r = Run(o);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << c.what;
    EXPECT_EQ(r.status().message().rfind(c.message_start, 0), 0u) << c.what << ": " << r.status().message();
    EXPECT_FALSE(fs::exists(dir_ / "bank")) << c.what;
  }
}

// The same kernel (template, compiler, flags, CPU) recorded by two portkit versions keys the same
// bank entry: the second run is a hit.
TEST_F(TuneApiTest, ABankEntrySurvivesAPortkitVersionChange) {
  auto text = ReadFile(options_.replay);
  ASSERT_TRUE(text.ok());
  ASSERT_NE(text->find(";portkit=0.1.0\""), std::string::npos);
  std::string newer = *text;
  newer.replace(newer.find(";portkit=0.1.0\""), 15, ";portkit=9.9.9\"");
  ASSERT_TRUE(WriteFileAtomic(dir_ / "newer.jsonl", newer).ok());
  auto first = Run(options_);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->accounting.add, 2);
  TuneOptions o = options_;
  o.replay = dir_ / "newer.jsonl";
  auto second = Run(o);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(second->accounting.hit, 2);
  // And the stored key names the template, not the version.
  auto listing = RunBankList(options_.bank);
  ASSERT_TRUE(listing.ok());
  for (const auto& e : listing->entries) {
    EXPECT_EQ(e.validators.find("portkit="), std::string::npos) << e.validators;
    EXPECT_NE(e.validators.find(";template="), std::string::npos) << e.validators;
  }
}

TEST_F(TuneApiTest, InputErrorsAreData) {
  TuneOptions o = options_;
  o.replay = dir_ / "missing.jsonl";
  auto r = Run(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing.jsonl"), std::string::npos);
  auto missing_bank = RunBankList(dir_ / "nobank");
  EXPECT_EQ(missing_bank.status().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(fs::exists(dir_ / "nobank"));
}

}  // namespace
}  // namespace portkit::tune
