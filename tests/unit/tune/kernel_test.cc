// The compiled kernels as a runtime uses them: reentrant (many threads calling one loaded object
// at once with different inputs and shapes, every result checked against the fp64 reference), and
// validation that scales with sqrt(K) against fp64 references (a kernel rounding its inputs to
// fp16 fails at K = 2^18 while fp32 blocked and sequential sums pass).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tune/builder.h"
#include "tune/operators/conv2d/conv2d_op.h"
#include "tune/operators/gemm/gemm_op.h"
#include "tune/runner.h"

namespace portkit::tune {
namespace {
namespace fs = std::filesystem;
using KernelFn = void (*)(const float* const*, float*, const long*);

class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_kernel_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    BuildOptions bo;
    bo.cache_dir = dir_;
    bo.parallel = 2;
    builder_ = std::make_unique<Builder>(bo, logger_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Builds `source` and loads it into this process (kept loaded: the test's threads call it).
  KernelFn Load(const std::string& source) {
    auto builds = builder_->BuildAll({source});
    EXPECT_TRUE(builds[0].ok) << builds[0].error;
    if (!builds[0].ok) return nullptr;
    void* h = dlopen(builds[0].shared_object.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(h, nullptr) << dlerror();
    return h ? reinterpret_cast<KernelFn>(dlsym(h, "portkit_kernel")) : nullptr;
  }

  Logger logger_{nullptr, SystemClock()};
  fs::path dir_;
  std::unique_ptr<Builder> builder_;
};

OpDesc Gemm(long m, long k, long n, bool bias) {
  OpDesc d;
  d.name = "fc";
  d.type = "MatMul";
  d.layout = "ND";
  d.inputs = {{m, k}, {k, n}};
  d.bias = bias;
  return d;
}

// Threads x calls, each call with its own shape and values; every output checked. The old
// template (a static scratch buffer per worker index shared by all callers) failed this.
TEST_F(KernelTest, ConcurrentCallsFromManyThreadsAreEachCorrect) {
  GemmOperator proto(Gemm(8, 8, 8, true));
  SearchSpace space = proto.Space(4);
  for (const char* cfg : {"MC=48,NC=768,KC=128,MR=6,NR=16,VW=8,PACK_A=1,ORDER=0,UNROLL=1,THREADS=2",
                          "MC=48,NC=768,KC=128,MR=4,NR=32,VW=16,PACK_A=0,ORDER=1,UNROLL=4,THREADS=4",
                          "MC=96,NC=1536,KC=256,MR=6,NR=16,VW=16,PACK_A=1,ORDER=0,UNROLL=1,THREADS=1"}) {
    SCOPED_TRACE(cfg);
    auto c = space.Parse(cfg);
    ASSERT_TRUE(c.ok() && space.Valid(*c)) << space.Check(*c);
    KernelFn fn = Load(proto.Source(space, *c));
    ASSERT_NE(fn, nullptr);
    constexpr int kThreads = 4, kCalls = 40;
    std::atomic<int> checked{0}, wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kCalls; ++i) {
          // Shapes differ per thread and call (edges in every dimension, several cache blocks).
          long m = 3 + (t * 7 + i * 5) % 70, n = 5 + (t * 13 + i * 11) % 90, k = 1 + (t * 17 + i * 3) % 300;
          GemmOperator op(Gemm(m, k, n, (i + t) % 2 == 0));
          Workload w = op.MakeWorkload();
          // Different values per call too: the workload's fixed seeds are re-filled.
          FillDeterministic(w.inputs[0], 1000 + t * kCalls + i);
          FillDeterministic(w.inputs[1], 5000 + t * kCalls + i);
          ReferenceGemm(w.inputs[0].data(), w.inputs[1].data(), w.inputs[2].empty() ? nullptr : w.inputs[2].data(),
                        w.reference.data(), m, n, k);
          std::vector<const float*> in;
          for (const auto& v : w.inputs) in.push_back(v.empty() ? nullptr : v.data());
          std::vector<float> out(w.output_size, std::nanf(""));
          fn(in.data(), out.data(), w.dims.data());
          if (!ValidateOutput(out, w).empty()) ++wrong;
          ++checked;
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(checked.load(), kThreads * kCalls);
    EXPECT_EQ(wrong.load(), 0);
  }
}

TEST_F(KernelTest, ConcurrentConvolutionsAreEachCorrect) {
  auto conv_desc = [](long n, long c, long h, long w, long o, long kh, long kw, long s, long p, long g) {
    OpDesc d;
    d.name = "conv";
    d.type = "Conv2D";
    d.layout = "NCHW";
    d.inputs = {{n, c, h, w}, {o, c / g, kh, kw}};
    d.stride[0] = d.stride[1] = s;
    d.padding[0] = d.padding[1] = p;
    d.groups = g;
    d.bias = true;
    return d;
  };
  Conv2dOperator proto(conv_desc(1, 2, 5, 5, 2, 3, 3, 1, 1, 1));
  SearchSpace space = proto.Space(4);
  auto c = space.Parse("MC=48,NC=768,KC=128,MR=4,NR=16,VW=16,PACK_A=1,ORDER=0,UNROLL=1,THREADS=2");
  ASSERT_TRUE(c.ok() && space.Valid(*c));
  KernelFn fn = Load(proto.Source(space, *c));
  ASSERT_NE(fn, nullptr);
  std::atomic<int> checked{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        long g = 1 + (i + t) % 2;
        Conv2dOperator op(conv_desc(1 + i % 2, 2 * g * (1 + t), 6 + i % 9, 5 + t * 3, 4 * g, 1 + i % 3, 1 + (i + t) % 3,
                                    1 + i % 2, i % 2, g));
        Workload w = op.MakeWorkload();
        FillDeterministic(w.inputs[0], 100 + t * 30 + i);
        ReferenceConv2d(w.inputs[0].data(), w.inputs[1].data(), w.inputs[2].data(), w.reference.data(), w.dims.data());
        std::vector<const float*> in;
        for (const auto& v : w.inputs) in.push_back(v.empty() ? nullptr : v.data());
        std::vector<float> out(w.output_size, std::nanf(""));
        fn(in.data(), out.data(), w.dims.data());
        if (!ValidateOutput(out, w).empty()) ++wrong;
        ++checked;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(checked.load(), 90);
  EXPECT_EQ(wrong.load(), 0);
}

// K = 2^18: a kernel that rounds A and B to fp16 (then accumulates exactly) is rejected; the
// template's default and a plain sequential fp32 loop pass. With the old tolerance, linear in K
// (4e-7 * K = 0.1), the fp16 kernel passed.
TEST_F(KernelTest, ValidationScalesWithSqrtKAndRejectsFp16Inputs) {
  const long m = 4, n = 16, k = 1L << 18;
  GemmOperator op(Gemm(m, k, n, false));
  Workload w = op.MakeWorkload();
  EXPECT_NEAR(w.atol, kAtolPerSqrtTerm * 512, 1e-12);

  // In process: sequential fp32 sums pass, fp16-rounded inputs fail.
  std::vector<float> seq(m * n), half(m * n);
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      float acc = 0.f;
      double acc16 = 0;
      for (long p = 0; p < k; ++p) {
        float a = w.inputs[0][i * k + p], b = w.inputs[1][p * n + j];
        acc += a * b;
        acc16 += static_cast<double>(static_cast<float>(static_cast<_Float16>(a))) *
                 static_cast<double>(static_cast<float>(static_cast<_Float16>(b)));
      }
      seq[i * n + j] = acc;
      half[i * n + j] = static_cast<float>(acc16);
    }
  EXPECT_EQ(ValidateOutput(seq, w), "");
  EXPECT_NE(ValidateOutput(half, w), "");

  // Compiled and run through the measuring child like any candidate.
  const std::string fp16_kernel =
      "extern \"C\" void portkit_kernel(const float* const* in, float* out, const long* d) {\n"
      "  long m = d[0], n = d[1], k = d[2];\n"
      "  for (long i = 0; i < m; ++i) for (long j = 0; j < n; ++j) {\n"
      "    double acc = 0;\n"
      "    for (long p = 0; p < k; ++p) acc += (double)(float)(_Float16)in[0][i * k + p] *\n"
      "                                        (double)(float)(_Float16)in[1][p * n + j];\n"
      "    out[i * n + j] = (float)acc;\n"
      "  }\n"
      "}\n";
  SearchSpace space = op.Space(2);
  auto builds = builder_->BuildAll({fp16_kernel, op.Source(space, op.DefaultConfig(space, 2))});
  ASSERT_TRUE(builds[0].ok) << builds[0].error;
  ASSERT_TRUE(builds[1].ok) << builds[1].error;
  MeasureOptions mo;
  mo.repeats = 5;
  mo.min_repeat_us = 50;
  mo.timeout_seconds = 120;
  Measurement fp16 = Measure(builds[0].shared_object, w, mo);
  EXPECT_EQ(fp16.status, MeasureStatus::kWrongResult) << fp16.detail;
  Measurement good = Measure(builds[1].shared_object, w, mo);
  EXPECT_EQ(good.status, MeasureStatus::kOk) << good.detail;
}

}  // namespace
}  // namespace portkit::tune
