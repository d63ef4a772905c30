// SGAT and GDAT called as a library (RunSgat, RunGdat): the options checked before anything runs,
// an interpreter that cannot be started, and a GDAT run on the cost model (needs python3 only).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tune/api.h"

namespace portkit::tune {
namespace {
namespace fs = std::filesystem;

class CompanionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_companion_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  SgatOptions Sgat() const {
    SgatOptions o;
    o.model = "usermodel:make";
    o.inputs = {"4x16"};
    o.output = dir_ / "out";
    return o;
  }
  GdatOptions Simulate() const {
    GdatOptions o;
    o.simulate = fs::path(PORTKIT_SOURCE_DIR) / "examples" / "gdat" / "resnet_like.json";
    o.output = dir_ / "out";
    o.python = "python3";
    return o;
  }
  Context MakeContext() { return Context{logger_, SystemClock(), DataDirs(fs::path(PORTKIT_TEST_DATA_DIR)), 1, true}; }

  fs::path dir_;
  Logger logger_{nullptr, SystemClock()};
};

TEST_F(CompanionTest, SgatOptionsAreChecked) {
  EXPECT_TRUE(ValidateSgatOptions(Sgat()).ok());
  SgatOptions o = Sgat();
  o.job_type = 3;
  EXPECT_EQ(ValidateSgatOptions(o).code(), ErrorCode::kUnsupported);
  EXPECT_EQ(ValidateSgatOptions(o).message().rfind("--job-type=3: with --framework=pytorch 1 (SGAT) and 2", 0), 0u);
  o = Sgat();
  o.model = "usermodel.py";
  EXPECT_EQ(ValidateSgatOptions(o).message().rfind("--model 'usermodel.py': with --framework=pytorch give", 0), 0u);
  o = Sgat();
  o.inputs = {"4x16", "int64:4x16:5..5"};
  EXPECT_EQ(ValidateSgatOptions(o).message(),
            "--input 'int64:4x16:5..5': the range 5..5 is empty (values are drawn from [LOW, HIGH), LOW < HIGH)");
  o = Sgat();
  o.inputs = {"complex:4"};
  EXPECT_EQ(ValidateSgatOptions(o).message().rfind("--input 'complex:4': unknown dtype 'complex'", 0), 0u);
  o = Sgat();
  o.rounds = 2;
  EXPECT_EQ(ValidateSgatOptions(o).message(), "--rounds 2: give 3 to 10000");
}

TEST_F(CompanionTest, SgatWithoutAnInterpreterIsAnError) {
  SgatOptions o = Sgat();
  o.python = (dir_ / "no_such_python").string();
  Context ctx = MakeContext();
  auto r = RunSgat(o, ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("cannot start the Python companion with '" + o.python + "': ", 0), 0u)
      << r.status().message();
}

TEST_F(CompanionTest, GdatOptionsAreChecked) {
  const DataDirs data(fs::path(PORTKIT_TEST_DATA_DIR));
  EXPECT_TRUE(ValidateGdatOptions(Simulate(), data).ok());
  GdatOptions o = Simulate();
  o.framework = "tensorflow";
  EXPECT_EQ(ValidateGdatOptions(o, data).message(),
            "--framework tensorflow: GDAT is implemented for pytorch only (DDP)");
  o = Simulate();
  o.model = "m:f";
  EXPECT_EQ(ValidateGdatOptions(o, data).message().rfind("GDAT needs either --model", 0), 0u);
  o = Simulate();
  o.simulate.clear();
  o.model = "m:f";
  EXPECT_EQ(ValidateGdatOptions(o, data).message(), "--model needs --input SHAPE (e.g. --input 8x3x32x32)");
  o = Simulate();
  o.backend = "nosuch";
  Status st = ValidateGdatOptions(o, data);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("--backend nosuch: not a process-group backend of target ", 0), 0u) << st.message();
  o = Simulate();
  o.nproc = 0;
  EXPECT_EQ(ValidateGdatOptions(o, data).message(), "--nproc 0: give 1 to 256");
  EXPECT_EQ(GdatWrittenFile(Simulate()), dir_ / "out" / "gdat_settings.json");
  o.describe = dir_ / "d.json";
  EXPECT_EQ(GdatWrittenFile(o), dir_ / "d.json");
}

TEST_F(CompanionTest, GdatWithoutAnInterpreterIsAFailedRun) {
  GdatOptions o = Simulate();
  o.python = (dir_ / "no_such_python").string();
  Context ctx = MakeContext();
  auto r = RunGdat(o, ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInternal);
  EXPECT_EQ(r.status().message().rfind("cannot start " + o.python + " for GDAT: ", 0), 0u) << r.status().message();
}

// --simulate needs no torch: the companion runs with python3 and writes the settings.
TEST_F(CompanionTest, GdatSimulatesAndReportsItsEnd) {
  Context ctx = MakeContext();
  auto r = RunGdat(Simulate(), ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->companion.end, CompanionEnd::kOk) << r->companion.failure;
  EXPECT_EQ(r->companion.python, "python3");
  EXPECT_EQ(r->companion.argv.at(2), "portkit.gdat");
  EXPECT_EQ(r->written, dir_ / "out" / "gdat_settings.json");
  EXPECT_TRUE(fs::exists(r->written));

  // A description that is not JSON: the companion refuses it (exit status 2) and says why.
  GdatOptions bad = Simulate();
  bad.simulate = dir_ / "bad.json";
  std::FILE* f = std::fopen(bad.simulate.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{not json", f);
  std::fclose(f);
  bad.output = dir_ / "out2";
  auto refused = RunGdat(bad, ctx);
  ASSERT_TRUE(refused.ok()) << refused.status().message();
  EXPECT_EQ(refused->companion.end, CompanionEnd::kRefused);
  EXPECT_TRUE(refused->companion.failure.empty());
}

}  // namespace
}  // namespace portkit::tune
