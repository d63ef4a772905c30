// The advisor's target-driven rule (non_native_ops), the host-operator table and the time-based
// launch-bound judgement, on a small hand-made Kineto trace and on the reference traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <unistd.h>

#include "core/context.h"
#include "core/log.h"
#include "prof/api.h"

namespace portkit::prof {
namespace {
namespace fs = std::filesystem;

const fs::path kTraces = fs::path(PORTKIT_TEST_DATA_DIR) / ".." / "tests" / "data" / "traces";

std::string Op(const std::string& name, int tid, int ts, int dur, const std::string& cat = "cpu_op") {
  return "{\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name +
         "\", \"pid\": 1, \"tid\": " + std::to_string(tid) + ", \"ts\": " + std::to_string(ts) +
         ", \"dur\": " + std::to_string(dur) + ", \"args\": {\"Input Dims\": [[8, 32]]}}";
}

class ProfAdvisor : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_advisor_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Copies reference trace `name` into its own folder and imports it.
  fs::path Imported(const std::string& name) {
    fs::path d = dir_ / name;
    fs::create_directories(d);
    fs::copy_file(kTraces / "kineto" / name, d / name);
    auto r = RunImport({d}, ctx_);
    EXPECT_TRUE(r.ok() && r->FirstFailure().ok());
    return d;
  }

  static const AdvisorFinding* Find(const AnalyseReport& r, const std::string& rule) {
    for (const auto& f : r.findings)
      if (f.rule == rule) return &f;
    return nullptr;
  }

  Logger logger_{nullptr, SystemClock()};
  Context ctx_{logger_, SystemClock(), PORTKIT_TEST_DATA_DIR};
  fs::path dir_;
};

// One step of 1000 us: nn.Mish (aten::mish with a nested allocation, its backward under the
// autograd node) on thread 1, the decomposed form with its backward on thread 2, and a Mish
// outside the step (not counted).
TEST_F(ProfAdvisor, NonNativeOpsNamesMishItsShareAndTheFix) {
  fs::path d = dir_ / "mish";
  fs::create_directories(d);
  std::ofstream(d / "mish.pt.trace.json")
      << "{\"schemaVersion\": 1, \"traceEvents\": [" << Op("ProfilerStep#1", 1, 1000, 1000, "user_annotation") << ", "
      << Op("aten::conv2d", 1, 1010, 100) << ", " << Op("aten::mish", 1, 1200, 200) << ", "
      << Op("aten::empty", 1, 1210, 50) << ", " << Op("MishBackward0", 1, 1500, 310) << ", "
      << Op("aten::mish_backward", 1, 1505, 300) << ", " << Op("aten::softplus", 2, 1100, 10) << ", "
      << Op("aten::tanh", 2, 1120, 10) << ", " << Op("aten::mul", 2, 1140, 10) << ", "
      << Op("aten::softplus_backward", 2, 1600, 20) << ", " << Op("aten::tanh_backward", 2, 1700, 20) << ", "
      << Op("aten::mish", 1, 5000, 900) << "]}";
  auto imported = RunImport({d}, ctx_);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_TRUE(imported->FirstFailure().ok()) << imported->FirstFailure().message();
  auto r = RunAnalyse({d}, ctx_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const AdvisorFinding* f = Find(*r, "non_native_ops");
  ASSERT_NE(f, nullptr);
  // Self time: mish 150 (200 less the nested 50), mish_backward 300, decomposed 30 + backward 40:
  // 520 us of the 1000 us step.
  EXPECT_EQ(f->title, "Mish does not run natively on the target: 52.0% of step time");
  EXPECT_EQ(f->severity, Severity::kHigh);
  EXPECT_NE(f->evidence.find("aten::mish 1 calls 150.0 us"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("aten::mish_backward 1 calls 300.0 us"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("decomposed form softplus-tanh-mul 1 times 30.0 us"), std::string::npos);
  EXPECT_NE(f->evidence.find("aten::softplus_backward 1 calls 20.0 us"), std::string::npos);
  EXPECT_NE(f->evidence.find("520.0 us of 1.000 ms step time"), std::string::npos) << f->evidence;
  EXPECT_NE(f->advice.find("torch.nn.Mish"), std::string::npos);
  EXPECT_NE(f->advice.find("torch.nn.LeakyReLU"), std::string::npos);
  EXPECT_NE(f->advice.find("check the accuracy"), std::string::npos);
  // The old advice (use the fused torch.nn.Mish) is gone.
  for (const auto& x : r->findings) EXPECT_EQ(x.advice.find("one fused kernel"), std::string::npos);
  // Host-operator table: self and total time.
  auto mish =
      std::find_if(r->host_ops.begin(), r->host_ops.end(), [](const HostOpStat& s) { return s.name == "aten::mish"; });
  ASSERT_NE(mish, r->host_ops.end());
  EXPECT_EQ(mish->count, 2);
  EXPECT_EQ(mish->self_ns, 150'000 + 900'000);
  EXPECT_EQ(mish->total_ns, 200'000 + 900'000);
  EXPECT_EQ(r->host_ops.front().name, "aten::mish");  // the most self time first
  // The summary carries it per input shape, with numeric columns.
  auto summary = RunExportSummary({d}, ctx_);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  const SummaryTable& t = summary->tables.back();
  EXPECT_EQ(t.name, "host_op_summary");
  ASSERT_FALSE(t.rows.empty());
  EXPECT_EQ(t.rows[0], (std::vector<std::string>{"aten::mish", "[[8, 32]]", "2", "1050.000", "1100.000", "525.000",
                                                 "66.46"}));  // of 1580 us self in all
  EXPECT_EQ(t.numeric, (std::vector<bool>{false, false, true, true, true, true, true}));
}

TEST_F(ProfAdvisor, ReferenceTracesHaveNoMishAndAConsistentHostOpTable) {
  fs::path d = Imported("trace_diff__control__control.json.gz");
  auto r = RunAnalyse({d, 1000}, ctx_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Find(*r, "non_native_ops"), nullptr);
  ASSERT_FALSE(r->host_ops.empty());
  for (size_t i = 0; i < r->host_ops.size(); ++i) {
    EXPECT_GE(r->host_ops[i].self_ns, 0);
    EXPECT_LE(r->host_ops[i].self_ns, r->host_ops[i].total_ns) << r->host_ops[i].name;
    if (i) EXPECT_GE(r->host_ops[i - 1].self_ns, r->host_ops[i].self_ns);
  }
  // Self times partition the host operators' time: their sum never exceeds the outermost
  // operators' total, and is at least the union the time split shows within the steps.
  int64_t self = 0;
  for (const auto& op : r->host_ops) self += op.self_ns;
  EXPECT_GE(self, r->breakdown.host_ops);
  // The CPU-only trace: its four allocations.
  fs::path cpu = Imported("cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
  auto c = RunAnalyse({cpu}, ctx_);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->host_ops.size(), 1u);
  EXPECT_EQ(c->host_ops[0].name, "aten::empty");
  EXPECT_EQ(c->host_ops[0].count, 4);
  EXPECT_EQ(c->host_ops[0].self_ns, c->host_ops[0].total_ns);
}

TEST_F(ProfAdvisor, LaunchBoundIsJudgedByTime) {
  // ROCm minitoy: the launch calls take 72 % of the profiled time, the device is busy 1.6 %.
  auto amd = RunAnalyse({Imported("amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz")}, ctx_);
  ASSERT_TRUE(amd.ok());
  EXPECT_GE(amd->breakdown.launch, amd->breakdown.device_busy);
  const AdvisorFinding* f = Find(*amd, "short_tasks");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kHigh);
  EXPECT_EQ(f->title.rfind("launch-bound: launch calls take 72.1% of step time", 0), 0u) << f->title;
  // Many short kernels but the device busy longer than the launches: not launch-bound.
  auto ctl = RunAnalyse({Imported("trace_diff__control__control.json.gz")}, ctx_);
  ASSERT_TRUE(ctl.ok());
  EXPECT_GT(ctl->breakdown.launch, 0);
  EXPECT_EQ(Find(*ctl, "short_tasks"), nullptr);
}

}  // namespace
}  // namespace portkit::prof

namespace portkit::prof {
namespace {

// collect's step 0 (before the first optimizer step) is the warm-up: ProfilerStep#0 of a trace
// with later steps is reported apart and left out of the steps, in analyse and in diff.
TEST_F(ProfAdvisor, TheWarmUpStepIsReportedApart) {
  fs::path d = dir_ / "warmup";
  fs::create_directories(d);
  std::ofstream(d / "w.pt.trace.json") << "{\"schemaVersion\": 1, \"traceEvents\": ["
                                       << Op("ProfilerStep#0", 1, 0, 5000, "user_annotation") << ", "
                                       << Op("aten::conv2d", 1, 100, 4000) << ", "
                                       << Op("ProfilerStep#1", 1, 6000, 1000, "user_annotation") << ", "
                                       << Op("aten::conv2d", 1, 6100, 500) << ", "
                                       << Op("ProfilerStep#2", 1, 7000, 3000, "user_annotation") << ", "
                                       << Op("aten::conv2d", 1, 7100, 500) << "]}";
  auto imported = RunImport({d}, ctx_);
  ASSERT_TRUE(imported.ok() && imported->FirstFailure().ok());
  auto r = RunAnalyse({d}, ctx_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->breakdown.steps, 2u);
  EXPECT_EQ(r->breakdown.warmup_steps, 1u);
  EXPECT_EQ(r->breakdown.warmup, 5'000'000);
  EXPECT_EQ(r->breakdown.wall, 4'000'000);  // steps 1 and 2 only
  auto diff = RunDiff({d, d}, ctx_);
  ASSERT_TRUE(diff.ok()) << diff.status().message();
  EXPECT_EQ(diff->base.steps, 2u);
  EXPECT_DOUBLE_EQ(diff->base.step_ms, 2.0);  // (1 ms + 3 ms) / 2, without the 5 ms warm-up
  EXPECT_EQ(diff->base.warmup_steps, 1u);
  EXPECT_DOUBLE_EQ(diff->base.warmup_ms, 5.0);
}

// The step work time's positions (docs/prof.md, "Noise-aware gate"): each top-level CPU op of the
// step's thread, the k-th of its name, holds the time up to the next top-level op's start; nested
// ops and other threads' ops are inside those; "(step start)" holds the time before the first op.
TEST_F(ProfAdvisor, StepsAreCutIntoPositionsThatAddUpToTheirSpan) {
  fs::path d = dir_ / "positions";
  fs::create_directories(d);
  std::ofstream(d / "p.pt.trace.json") << "{\"schemaVersion\": 1, \"traceEvents\": ["
                                       << Op("ProfilerStep#1", 1, 1000, 1000, "user_annotation") << ", "
                                       << Op("aten::conv2d", 1, 1100, 300) << ", "
                                       << Op("aten::convolution", 1, 1110, 280) << ", "
                                       << Op("aten::relu", 1, 1450, 100) << ", " << Op("aten::conv2d", 1, 1600, 200)
                                       << ", " << Op("aten::mm", 2, 1200, 500) << ", "
                                       << Op("ProfilerStep#2", 1, 2000, 600, "user_annotation") << ", "
                                       << Op("aten::conv2d", 1, 2000, 250) << ", " << Op("aten::relu", 1, 2300, 50)
                                       << "]}";
  auto imported = RunImport({d}, ctx_);
  ASSERT_TRUE(imported.ok() && imported->FirstFailure().ok());
  auto store = Store::OpenForReading(StorePath(d));
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto series = ComputeStepSeries(*store);
  ASSERT_TRUE(series.ok()) << series.status().message();
  ASSERT_EQ(series->step_ns, (std::vector<double>{1'000'000, 600'000}));
  std::map<std::string, std::vector<double>> want = {{"(step start)", {100'000, 0}},
                                                     {"aten::conv2d#0", {350'000, 300'000}},
                                                     {"aten::relu#0", {150'000, 300'000}},
                                                     {"aten::conv2d#1", {400'000, 0}}};
  EXPECT_EQ(series->positions, want);
  // The step work time of the two steps: each position's minimum, summed.
  SideSeries side{*series};
  EXPECT_DOUBLE_EQ(WorkTime(FlatPositions(side), AllSteps(StepCounts(side))), 0 + 300'000 + 150'000 + 0);
}

}  // namespace
}  // namespace portkit::prof
