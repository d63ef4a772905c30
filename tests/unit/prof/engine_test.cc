// The profiling engine called as a library (src/prof/api.h): import, summary, advisor and diff
// in process, checking the returned reports.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/context.h"
#include "core/log.h"
#include "prof/api.h"

namespace portkit::prof {
namespace {
namespace fs = std::filesystem;

const fs::path kTraces = fs::path(PORTKIT_TEST_DATA_DIR) / ".." / "tests" / "data" / "traces";

class ProfEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_engine_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    for (const char* side : {"base", "cmp"}) fs::create_directories(dir_ / side);
    fs::copy_file(kTraces / "kineto" / "trace_diff__control__control.json.gz", dir_ / "base" / "control.json.gz");
    fs::copy_file(kTraces / "kineto" / "trace_diff__test__test.json.gz", dir_ / "cmp" / "test.json.gz");
  }
  void TearDown() override { fs::remove_all(dir_); }

  Logger logger_{nullptr, SystemClock()};
  Context ctx_{logger_, SystemClock(), PORTKIT_TEST_DATA_DIR};
  fs::path dir_;
};

TEST_F(ProfEngine, ImportFindsTracesByContentAndNotesTheRest) {
  std::ofstream(dir_ / "base" / "config.json") << "{\"lr\": 0.1}";
  std::ofstream(dir_ / "base" / "README") << "not a trace";
  auto report = RunImport({dir_ / "base"}, ctx_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->traces.size(), 1u);
  const auto& t = report->traces[0];
  EXPECT_EQ(t.path, "control.json.gz");
  EXPECT_EQ(t.importer, "kineto");
  ASSERT_TRUE(t.status.ok());
  EXPECT_GT(t.result.events, 1000u);
  EXPECT_GT(t.result.per_kind.at("kernel"), 0u);
  EXPECT_FALSE(t.result.truncated);
  ASSERT_EQ(report->skipped.size(), 1u);  // config.json; README has no trace-like name
  EXPECT_EQ(report->skipped[0].first, "config.json");
  EXPECT_TRUE(fs::exists(report->database));
  EXPECT_TRUE(report->FirstFailure().ok());
}

TEST_F(ProfEngine, ImportErrors) {
  auto missing = RunImport({dir_ / "nope"}, ctx_);
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  fs::create_directories(dir_ / "empty");
  auto empty = RunImport({dir_ / "empty"}, ctx_);
  EXPECT_EQ(empty.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(empty.status().message().find("no trace found under"), std::string::npos);
  std::ofstream(dir_ / "empty" / "x.json") << "{\"lr\": 0.1}";
  auto not_trace = RunImport({dir_ / "empty" / "x.json"}, ctx_);
  EXPECT_EQ(not_trace.status().code(), ErrorCode::kParse);
  // A trace broken before its first event: reported for that file, nothing stored.
  std::ofstream(dir_ / "empty" / "cut.json") << "{\"traceEvents\": [{\"name\": \"x\", \"ph\": \"X\", \"ts\": 1, \"du";
  auto cut = RunImport({dir_ / "empty"}, ctx_);
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  ASSERT_EQ(cut->traces.size(), 1u);
  EXPECT_EQ(cut->FirstFailure().code(), ErrorCode::kParse);
  EXPECT_NE(cut->FirstFailure().message().find("no complete event"), std::string::npos);
}

TEST_F(ProfEngine, SummaryAnalyseAndDiffReturnData) {
  ASSERT_TRUE(RunImport({dir_ / "base"}, ctx_).ok());
  auto summary = RunExportSummary({dir_ / "base"}, ctx_);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  std::vector<std::string> names;
  for (const auto& t : summary->tables) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"op_summary", "op_statistic", "api_statistic", "kernel_statistic",
                                             "task_time", "step_trace", "host_op_summary"}));
  EXPECT_EQ(summary->tables[5].rows.size(), 6u);  // ProfilerStep#N
  // msprof's step_trace columns; every step has an FP start and an end after it.
  EXPECT_EQ(summary->tables[5].header[2], "FP Start(us)");
  EXPECT_EQ(summary->tables[5].header[3], "BP End(us)");
  for (const auto& row : summary->tables[5].rows) {
    ASSERT_FALSE(row[2].empty());
    EXPECT_LE(std::stod(row[6]), std::stod(row[2]));  // Iteration Start <= FP Start
    EXPECT_LE(std::stod(row[2]), std::stod(row[4]));  // FP Start <= Iteration End
  }
  // task_time: one row per device task, as op_summary.
  EXPECT_EQ(summary->tables[4].rows.size(), summary->tables[0].rows.size());

  auto advice = RunAnalyse({dir_ / "base"}, ctx_);
  ASSERT_TRUE(advice.ok()) << advice.status().message();
  EXPECT_EQ(advice->breakdown.steps, 6u);
  EXPECT_GT(advice->breakdown.wall, 0);
  EXPECT_GT(advice->breakdown.device_busy, 0);
  EXPECT_EQ(advice->time_split.front().first, "host operators");
  EXPECT_EQ(advice->top_operators.size(), 10u);
  EXPECT_FALSE(advice->top_device_tasks.empty());
  for (size_t i = 1; i < advice->findings.size(); ++i)
    EXPECT_LE(advice->findings[i - 1].severity, advice->findings[i].severity);
  EXPECT_EQ(advice->CountAtLeast(Severity::kInfo), advice->findings.size());

  // The compared side is imported on the way; the test trace's steps are slower.
  auto diff = RunDiff({dir_ / "base", dir_ / "cmp", 10.0}, ctx_);
  ASSERT_TRUE(diff.ok()) << diff.status().message();
  EXPECT_TRUE(fs::exists(dir_ / "cmp" / "portkit.db"));
  EXPECT_EQ(diff->base.steps, 6u);
  EXPECT_EQ(diff->compare.steps, 6u);
  ASSERT_TRUE(diff->step_change_percent.has_value());
  EXPECT_GT(*diff->step_change_percent, 10.0);
  EXPECT_TRUE(diff->regressed);
  ASSERT_FALSE(diff->operators.empty());
  for (size_t i = 1; i < diff->kernels.size(); ++i)
    EXPECT_GE(std::llabs(diff->kernels[i - 1].cmp_ns - diff->kernels[i - 1].base_ns),
              std::llabs(diff->kernels[i].cmp_ns - diff->kernels[i].base_ns));
  auto no_gate = RunDiff({dir_ / "base", dir_ / "cmp", std::nullopt}, ctx_);
  ASSERT_TRUE(no_gate.ok());
  EXPECT_FALSE(no_gate->regressed);
  auto improvement = RunDiff({dir_ / "cmp", dir_ / "base", 0.0}, ctx_);
  ASSERT_TRUE(improvement.ok());
  EXPECT_FALSE(improvement->regressed);
}

TEST_F(ProfEngine, DiffPoolsSeveralRunsAndGatesOnTheInterval) {
  // The same base folder given twice is two runs of 6 steps; the compared side once.
  DiffOptions o{dir_ / "base", dir_ / "cmp", 10.0};
  o.more_base = {dir_ / "base"};
  auto diff = RunDiff(o, ctx_);
  ASSERT_TRUE(diff.ok()) << diff.status().message();
  EXPECT_EQ(diff->base.runs, 2u);
  EXPECT_EQ(diff->base.steps, 12u);
  EXPECT_EQ(diff->compare.runs, 1u);
  EXPECT_EQ(diff->gate, DiffGate::kSignificant);
  // Traces with device tasks: the gate judges the median step (host positions wait on the device).
  EXPECT_FALSE(diff->judges_work);
  ASSERT_TRUE(diff->step_change.has_value());
  EXPECT_LE(diff->step_change->low, diff->step_change->percent);
  EXPECT_GE(diff->step_change->high, diff->step_change->percent);
  EXPECT_EQ(diff->verdict, SignificantVerdict(*diff->step_change, 10.0));
  EXPECT_EQ(diff->regressed, diff->verdict == Verdict::kRegressed);
  // Totals are per run: the base's operators as with one run.
  auto single = RunDiff({dir_ / "base", dir_ / "cmp", 10.0}, ctx_);
  ASSERT_TRUE(single.ok());
  ASSERT_EQ(single->operators.size(), diff->operators.size());
  for (size_t i = 0; i < diff->operators.size(); ++i)
    EXPECT_EQ(single->operators[i].base_ns, diff->operators[i].base_ns);
  // Reproducible: the same input, the same intervals.
  auto again = RunDiff(o, ctx_);
  EXPECT_EQ(again->step_change->low, diff->step_change->low);
  EXPECT_EQ(again->step_change->high, diff->step_change->high);
}

TEST_F(ProfEngine, ReadersNeedAnImportFirst) {
  auto st = RunAnalyse({dir_ / "base"}, ctx_).status();
  EXPECT_EQ(st.code(), ErrorCode::kNotFound);
  EXPECT_NE(st.message().find("run `portkit prof import -dir"), std::string::npos);
}

TEST_F(ProfEngine, CollectArgvPutsTheLauncherAfterTheInterpreterOptions) {
  CollectOptions o;
  o.command = {"python3", "-u", "-X", "dev", "train.py", "--epochs", "1"};
  auto argv = CollectArgv(o);
  ASSERT_TRUE(argv.ok());
  EXPECT_EQ(*argv, (std::vector<std::string>{"python3", "-u", "-X", "dev", "-m", "portkit.prof_launch", "train.py",
                                             "--epochs", "1"}));
  o.application = "python 'my script.py' -m x";
  EXPECT_EQ(*CollectArgv(o),
            (std::vector<std::string>{"python", "-m", "portkit.prof_launch", "my script.py", "-m", "x"}));
  o.application = "bash -c true";
  EXPECT_EQ(CollectArgv(o).status().code(), ErrorCode::kInvalidArgument);
  o.application.clear();
  o.command.clear();
  EXPECT_EQ(CollectArgv(o).status().code(), ErrorCode::kInvalidArgument);
}

// torchrun: every worker runs the program under the launcher (torchrun's own -m), options and
// their values kept in front; `python -m torch.distributed.run` likewise, with that interpreter.
TEST_F(ProfEngine, CollectArgvRunsTorchrunWorkersUnderTheLauncher) {
  fs::path bin = dir_ / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "torchrun") << "#!/opt/py/bin/python3.11\nimport sys\n";
  CollectOptions o;
  o.command = {(bin / "torchrun").string(),
               "--nproc_per_node",
               "2",
               "--master-port=29555",
               "--standalone",
               "train.py",
               "--epochs",
               "1"};
  auto argv = CollectArgv(o);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  EXPECT_EQ(*argv, (std::vector<std::string>{"/opt/py/bin/python3.11", "-m", "torch.distributed.run",
                                             "--nproc_per_node", "2", "--master-port=29555", "--standalone", "-m",
                                             "portkit.prof_launch", "train.py", "--epochs", "1"}));
  o.command = {(bin / "torchrun").string(), "--nnodes=1", "-m", "pkg.train", "-x"};
  EXPECT_EQ(*CollectArgv(o),
            (std::vector<std::string>{"/opt/py/bin/python3.11", "-m", "torch.distributed.run", "--nnodes=1", "-m",
                                      "portkit.prof_launch", "-m", "pkg.train", "-x"}));
  o.command = {"python3", "-m", "torch.distributed.run", "--nproc-per-node", "2", "t.py"};
  EXPECT_EQ(*CollectArgv(o), (std::vector<std::string>{"python3", "-m", "torch.distributed.run", "--nproc-per-node",
                                                       "2", "-m", "portkit.prof_launch", "t.py"}));
  o.command = {(bin / "torchrun").string(), "--no-python", "nvidia-smi"};
  EXPECT_EQ(CollectArgv(o).status().code(), ErrorCode::kInvalidArgument);
  o.command = {(bin / "torchrun").string(), "--nproc_per_node", "2"};
  EXPECT_EQ(CollectArgv(o).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace portkit::prof
