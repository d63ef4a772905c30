// Small real compiles (each ~0.5 s): the builder's cache, and the runner rejecting a crashing,
// a hanging and a wrong candidate without failing itself.
#include "tune/runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tune/builder.h"
#include "tune/tuner.h"

#include <chrono>
#include <fstream>

#include "tune/operators/conv2d/conv2d_op.h"
#include "tune/operators/gemm/gemm_op.h"

namespace portkit::tune {
namespace {
namespace fs = std::filesystem;

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_runner_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    OpDesc d;
    d.name = "fc";
    d.type = "MatMul";
    d.layout = "ND";
    d.inputs = {{5, 7}, {7, 19}};  // edges in every dimension of any register tile
    d.bias = true;
    op_ = std::make_unique<GemmOperator>(d);
    workload_ = op_->MakeWorkload();
  }
  void TearDown() override { fs::remove_all(dir_); }

  BuildOptions Options() {
    BuildOptions o;
    o.cache_dir = dir_;
    o.parallel = 2;
    return o;
  }

  fs::path dir_;
  std::unique_ptr<GemmOperator> op_;
  Workload workload_;
};

const char kPrelude[] = "extern \"C\" void portkit_kernel(const float* const* in, float* out, const long* d) {\n";

TEST_F(RunnerTest, RejectsBadCandidatesAndTimesAGoodOne) {
  Logger logger(nullptr, SystemClock());
  Builder builder(Options(), logger);
  ASSERT_FALSE(builder.compiler_version().empty());
  SearchSpace space = op_->Space(2);
  std::string good = op_->Source(space, op_->DefaultConfig(space, 2));
  std::vector<std::string> sources = {
      good,
      std::string(kPrelude) + "  *(volatile int*)nullptr = 1; }\n",                           // crashes
      std::string(kPrelude) + "  for (long i = 0; i < d[0] * d[1]; ++i) out[i] = 0.5f; }\n",  // wrong
      std::string(kPrelude) + "  for (;;) { asm volatile(\"\"); } }\n",                       // hangs
      "this is not C++\n",
  };
  auto builds = builder.BuildAll(sources);
  ASSERT_EQ(builds.size(), sources.size());
  for (size_t i = 0; i < 4; ++i) ASSERT_TRUE(builds[i].ok) << i << ": " << builds[i].error;
  EXPECT_FALSE(builds[4].ok);
  EXPECT_NE(builds[4].error.find("error"), std::string::npos) << builds[4].error;

  MeasureOptions mo;
  mo.repeats = 5;
  mo.min_repeat_us = 50;
  mo.timeout_seconds = 10;  // the working candidates get room on a loaded machine
  Measurement ok = Measure(builds[0].shared_object, workload_, mo);
  EXPECT_EQ(ok.status, MeasureStatus::kOk) << ok.detail;
  EXPECT_EQ(ok.samples_us.size(), 5u);
  EXPECT_GT(ok.median_us, 0);

  Measurement crash = Measure(builds[1].shared_object, workload_, mo);
  EXPECT_EQ(crash.status, MeasureStatus::kCrashed);
  EXPECT_EQ(crash.detail.rfind("crashed (signal 11", 0), 0u) << crash.detail;

  Measurement wrong = Measure(builds[2].shared_object, workload_, mo);
  EXPECT_EQ(wrong.status, MeasureStatus::kWrongResult);
  EXPECT_EQ(wrong.detail.rfind("output[0] = 0.5, reference", 0), 0u) << wrong.detail;

  MeasureOptions short_timeout = mo;
  short_timeout.timeout_seconds = 1;  // only the hanging candidate runs under the 1 s timeout
  Measurement hang = Measure(builds[3].shared_object, workload_, short_timeout);
  EXPECT_EQ(hang.status, MeasureStatus::kTimeout);
  EXPECT_EQ(hang.detail, "timed out after 1 s");

  auto [a, b] = MeasureInterleaved(builds[0].shared_object, builds[0].shared_object, workload_, mo);
  EXPECT_EQ(a.status, MeasureStatus::kOk);
  EXPECT_EQ(b.status, MeasureStatus::kOk);

  // Two objects in one child: the second is really loaded, not the first again under a reused
  // /proc/self/fd/N name, so a wrong second candidate is caught.
  auto [good_first, wrong_second] = MeasureInterleaved(builds[0].shared_object, builds[2].shared_object, workload_, mo);
  EXPECT_EQ(wrong_second.status, MeasureStatus::kWrongResult) << wrong_second.detail;
  EXPECT_EQ(wrong_second.detail.rfind("output[0] = 0.5, reference", 0), 0u) << wrong_second.detail;

  // The second build of the same source is a cache hit.
  auto again = builder.BuildAll({good});
  EXPECT_TRUE(again[0].ok && again[0].cached);
  EXPECT_EQ(again[0].shared_object, builds[0].shared_object);
}

// Candidates that exercise every loop of the template against the reference: several cache
// blocks in each dimension with edges, two threads, unpacked A; and a strided, padded, grouped
// convolution with bias whose GEMM has edge tiles everywhere.
TEST(KernelTemplateTest, BlockedGemmAndGroupedConvMatchTheReference) {
  fs::path dir = fs::temp_directory_path() / ("portkit_template_test_" + std::to_string(getpid()));
  Logger logger(nullptr, SystemClock());
  BuildOptions bo;
  bo.cache_dir = dir;
  bo.parallel = 2;
  Builder builder(bo, logger);

  OpDesc g;
  g.name = "fc";
  g.type = "MatMul";
  g.layout = "ND";
  g.inputs = {{100, 300}, {300, 800}};
  g.bias = true;
  GemmOperator gemm(g);
  SearchSpace gs = gemm.Space(2);
  auto gc = gs.Parse("MC=48,NC=768,KC=128,MR=6,NR=32,VW=8,PACK_A=0,ORDER=1,UNROLL=4,THREADS=2");
  ASSERT_TRUE(gc.ok() && gs.Valid(*gc)) << gs.Check(*gc);

  OpDesc c;
  c.name = "conv";
  c.type = "Conv2D";
  c.layout = "NCHW";
  c.inputs = {{2, 6, 11, 9}, {10, 3, 3, 2}};
  c.stride[0] = 2;
  c.padding[0] = 1;
  c.padding[1] = 2;
  c.groups = 2;
  c.bias = true;
  Conv2dOperator conv(c);
  SearchSpace cs = conv.Space(2);
  auto cc = cs.Parse("MC=48,NC=768,KC=128,MR=4,NR=16,VW=16,PACK_A=1,ORDER=0,UNROLL=1,THREADS=2");
  ASSERT_TRUE(cc.ok() && cs.Valid(*cc));

  auto builds = builder.BuildAll({gemm.Source(gs, *gc), conv.Source(cs, *cc)});
  ASSERT_TRUE(builds[0].ok) << builds[0].error;
  ASSERT_TRUE(builds[1].ok) << builds[1].error;
  MeasureOptions mo;
  mo.repeats = 5;
  mo.min_repeat_us = 50;
  Measurement mg = Measure(builds[0].shared_object, gemm.MakeWorkload(), mo);
  EXPECT_EQ(mg.status, MeasureStatus::kOk) << mg.detail;
  Measurement mc = Measure(builds[1].shared_object, conv.MakeWorkload(), mo);
  EXPECT_EQ(mc.status, MeasureStatus::kOk) << mc.detail;
  fs::remove_all(dir);
}

TEST(ReferenceTest, GemmAndConvReferencesAgreeOnA1x1Conv) {
  // A 1x1 convolution is a GEMM: W[O,C] x X[C,HW].
  const long C = 3, O = 2, HW = 4;
  std::vector<float> x(C * HW), w(O * C), bias = {0.5f, -1.f};
  FillDeterministic(x, 1);
  FillDeterministic(w, 2);
  std::vector<double> conv(O * HW), gemm(O * HW);
  long dims[] = {1, C, 2, 2, O, 1, 1, 1, 1, 0, 0, 1, 2, 2};
  ReferenceConv2d(x.data(), w.data(), bias.data(), conv.data(), dims);
  ReferenceGemm(w.data(), x.data(), nullptr, gemm.data(), O, HW, C);
  for (long o = 0; o < O; ++o)
    for (long i = 0; i < HW; ++i) EXPECT_DOUBLE_EQ(conv[o * HW + i], gemm[o * HW + i] + bias[o]);
}

}  // namespace
}  // namespace portkit::tune

namespace portkit::tune {
namespace {

// A compiler that hangs (a script that forks a sleep): the compile is killed with its process
// group at the builder's timeout and the candidate is rejected, not the run.
TEST(BuilderTest, ACompileRunningPastItsTimeoutIsKilledAndRejected) {
  fs::path dir = fs::temp_directory_path() / ("portkit_builder_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path cc = dir / "slowcc";
  {
    std::ofstream f(cc);
    f << "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'slowcc 1.0'; exit 0; fi\nsleep 30; echo done\n";
  }
  fs::permissions(cc, fs::perms::owner_all);
  Logger logger(nullptr, SystemClock());
  BuildOptions bo;
  bo.compiler = cc.string();
  bo.cache_dir = dir / "kernels";
  bo.timeout_seconds = 1;
  Builder builder(bo, logger);
  EXPECT_EQ(builder.compiler_version(), "slowcc 1.0");
  auto start = std::chrono::steady_clock::now();
  auto builds = builder.BuildAll({"int x;\n"});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(builds.size(), 1u);
  EXPECT_FALSE(builds[0].ok);
  EXPECT_EQ(builds[0].error.rfind("compile timed out: " + cc.string() + " timed out after 1 s", 0), 0u)
      << builds[0].error;
  EXPECT_LT(seconds, 10);
  EXPECT_FALSE(fs::exists(builds[0].shared_object));

  // A compiler that cannot be started: no version, so a session refuses to run with it.
  BuildOptions missing = bo;
  missing.compiler = (dir / "no-such-compiler").string();
  EXPECT_EQ(Builder(missing, logger).compiler_version(), "");
  fs::remove_all(dir);
}

TEST(CandidateTimeoutTest, ScalesWithTheWork) {
  EXPECT_EQ(CandidateTimeoutSeconds(1e6, 7, 1), 60);
  EXPECT_GT(CandidateTimeoutSeconds(2.0 * kMaxMacs, 7, 2), 300);
}

}  // namespace
}  // namespace portkit::tune
