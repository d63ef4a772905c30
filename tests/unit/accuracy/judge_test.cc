// Precision-aware culprits: a target whose every operator differs a little (bf16 against fp32,
// one-ulp noise on every output) names no culprit unless replay shows an operator's own error;
// small gradients are judged against their own scale.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "accuracy/api.h"
#include "accuracy/judge.h"
#include "test_dump.h"

namespace portkit::accuracy {
namespace {
using testing::F32;
using testing::I64;
using testing::TestOp;
using testing::TestTensor;

/// Deterministic values near a standard normal (sum of uniforms).
std::vector<float> Normal(size_t n, uint32_t seed, double scale = 1) {
  std::vector<float> out(n);
  for (auto& v : out) {
    double s = 0;
    for (int k = 0; k < 12; ++k) seed = seed * 1664525u + 1013904223u, s += (seed >> 8) / 16777216.0;
    v = static_cast<float>((s - 6) * scale);
  }
  return out;
}

float RoundBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

TestTensor Bf16(std::string key, const std::vector<float>& v) {
  std::vector<uint16_t> b;
  for (float f : v) {
    uint32_t u;
    float r = RoundBf16(f);
    std::memcpy(&u, &r, 4);
    b.push_back(static_cast<uint16_t>(u >> 16));
  }
  return {std::move(key), "BF16", {static_cast<int64_t>(v.size())}, testing::Bytes(b), ""};
}

enum class Target { kReference, kBf16, kUlp };

/// A chain: mul, add, tanh, sum over rows of 16 (a reduction whose rows nearly cancel), mul. The
/// bf16 run rounds every input and output to bf16 (computing in fp32 between, as CPU kernels do);
/// the ulp run multiplies every output by (1 + 1e-7·noise). `plant` adds `size` × RMS × noise to
/// the output of op `at`. With `replay`, every op also has `replay.output.0` (computed from the
/// reference's inputs quantised to the run's type) and, for bf16, `replay.baseline.output.0`.
std::vector<TestOp> Chain(Target run, int at = -1, double size = 0, bool replay = false) {
  const int kOps = 5;
  const char* names[] = {"aten::mul", "aten::add", "aten::tanh", "aten::sum", "aten::mul"};
  std::vector<float> x = Normal(512, 7), ref_x = x;
  uint32_t seed = 100;
  std::vector<TestOp> ops;
  auto apply = [](int i, const std::vector<float>& in) {
    std::vector<float> y;
    if (i == 3) {  // rows of 16 that cancel: each row's mean taken out first, plus a small part
      for (size_t r = 0; r < in.size() / 16; ++r) {
        double s = 0;
        for (size_t c = 0; c < 16; ++c) s += in[r * 16 + c];
        y.push_back(static_cast<float>(s));
      }
      return y;
    }
    for (float v : in) y.push_back(i == 0 ? v * 1.5f : i == 1 ? v + 0.3f : i == 2 ? std::tanh(v) : v * 0.5f);
    return y;
  };
  for (int i = 0; i < kOps; ++i) {
    auto quant = [&](std::vector<float> v) {
      if (run == Target::kBf16)
        for (auto& f : v) f = RoundBf16(f);
      return v;
    };
    auto finish = [&](std::vector<float> y, bool planted) {
      if (run == Target::kUlp) {
        auto n = Normal(y.size(), seed++);
        for (size_t e = 0; e < y.size(); ++e) y[e] = static_cast<float>(y[e] * (1 + 1e-7 * n[e]));
      }
      if (planted) {
        double sq = 0;
        for (float v : y) sq += double(v) * v;
        const double rms = std::sqrt(sq / y.size());
        auto n = Normal(y.size(), 1234);
        for (size_t e = 0; e < y.size(); ++e) y[e] = static_cast<float>(y[e] + size * rms * n[e]);
      }
      return quant(y);
    };
    std::vector<float> in = quant(x);
    std::vector<float> y = finish(apply(i, in), i == at);
    std::vector<float> ref_y = apply(i, ref_x);
    auto tensor = [&](std::string key, const std::vector<float>& v) {
      return run == Target::kBf16 ? Bf16(std::move(key), v) : F32(std::move(key), v);
    };
    TestOp op{names[i], "forward", {tensor("input.0", in), tensor("output.0", y)}};
    if (replay && run != Target::kReference) {
      std::vector<float> qref = quant(ref_x);
      op.tensors.push_back(tensor("replay.output.0", finish(apply(i, qref), i == at)));
      if (run == Target::kBf16) op.tensors.push_back(F32("replay.baseline.output.0", apply(i, qref)));
      op.replay = "{\"status\": \"ok\", \"reference_index\": " + std::to_string(i) + "}";
    }
    ops.push_back(op);
    x = y, ref_x = ref_y;
  }
  return ops;
}

class JudgeTest : public testing::DumpTest {};

TEST_F(JudgeTest, HealthyLowPrecisionAndUlpNoiseTargetsNameNoCulprit) {
  for (Target run : {Target::kBf16, Target::kUlp})
    for (bool replay : {false, true}) {
      auto r = CompareDumps(Chain(Target::kReference), Chain(run, -1, 0, replay));
      EXPECT_FALSE(r.first_divergence.has_value())
          << (run == Target::kBf16 ? "bf16" : "ulp") << " replay " << replay << ": " << r.first_divergence->name << " #"
          << r.first_divergence->index << " " << r.first_divergence_basis << ": " << r.first_divergence_evidence;
      EXPECT_NE(r.divergence_state, DivergenceState::kCulprit);
    }
  // Identical runs: no divergence at all.
  auto same = CompareDumps(Chain(Target::kReference), Chain(Target::kReference));
  EXPECT_EQ(same.divergence_state, DivergenceState::kNone);
  EXPECT_FALSE(same.drift_start.has_value());
}

TEST_F(JudgeTest, ReplayWithBaselineNamesThePlantedOperatorInBf16) {
  int hits = 0, cases = 0;
  for (int at : {0, 2, 4})
    for (double size : {1e-2, 1e-1}) {
      ++cases;
      auto r = CompareDumps(Chain(Target::kReference), Chain(Target::kBf16, at, size, true));
      ASSERT_TRUE(r.first_divergence.has_value()) << "op " << at << " size " << size;
      EXPECT_EQ(r.first_divergence->index, at) << r.first_divergence_evidence;
      EXPECT_EQ(r.first_divergence_basis, "replay");
      EXPECT_EQ(r.divergence_state, DivergenceState::kCulprit);
      hits += r.first_divergence->index == at;
    }
  EXPECT_EQ(hits, cases);
}

TEST_F(JudgeTest, WithoutReplayABf16FaultIsDriftOrTheRightOperatorNeverAWrongOne) {
  for (int at : {0, 2, 4})
    for (double size : {1e-2, 1e-1}) {
      auto r = CompareDumps(Chain(Target::kReference), Chain(Target::kBf16, at, size, false));
      if (r.first_divergence) {
        EXPECT_EQ(r.first_divergence->index, at) << size << " " << r.first_divergence_evidence;
      } else if (r.divergence_state == DivergenceState::kDrift) {
        ASSERT_TRUE(r.drift_start.has_value());
        EXPECT_LE(r.drift_start->index, at);
      }
    }
  // The ulp-noise device with a 1e-2 fault: its inputs' error is tiny, so the fault is named.
  auto u = CompareDumps(Chain(Target::kReference), Chain(Target::kUlp, 2, 1e-2));
  ASSERT_TRUE(u.first_divergence.has_value());
  EXPECT_EQ(u.first_divergence->index, 2);
  EXPECT_EQ(u.first_divergence_basis, "error growth");
}

TEST_F(JudgeTest, SmallGradientsAreJudgedAgainstTheirOwnScale) {
  // gelu_backward(grad of 1e-6 scale, activation of 1): a 10 % error in its output is not
  // "zero up to rounding" although it is under 2^-20 of the activation.
  std::vector<float> g = Normal(256, 3, 1e-6), x = Normal(256, 5), y(256), bad(256);
  auto n = Normal(256, 9);
  for (size_t e = 0; e < g.size(); ++e) {
    double cdf = 0.5 * (1 + std::erf(x[e] / std::sqrt(2.0)));
    double pdf = std::exp(-0.5 * x[e] * x[e]) / std::sqrt(2 * M_PI);
    y[e] = static_cast<float>(g[e] * (cdf + x[e] * pdf));
    bad[e] = static_cast<float>(y[e] * (1 + 0.1 * n[e]));
  }
  TestOp ref{"aten::gelu_backward", "backward", {F32("input.0", g), F32("input.1", x), F32("output.0", y)}};
  TestOp tgt{"aten::gelu_backward", "backward", {F32("input.0", g), F32("input.1", x), F32("output.0", bad)}};
  auto r = CompareDumps({ref}, {tgt});
  const CompareRow* out = nullptr;
  for (const auto& row : r.rows)
    if (row.output) out = &row;
  ASSERT_NE(out, nullptr);
  EXPECT_FALSE(out->negligible) << out->message;
  // The row keeps the tensor rule's verdict (Cosine 0.995 is within it); the operator's own error,
  // ~1e6 roundings with identical inputs, names it.
  ASSERT_TRUE(r.first_divergence.has_value());
  EXPECT_EQ(r.first_divergence->name, "aten::gelu_backward");
  EXPECT_EQ(r.first_divergence_basis, "inputs matched");
}

TEST_F(JudgeTest, AmplificationOfACancellingSumIsItsConditioning) {
  // 16 terms of rms 1 per output that sum to rms 0.01: Σ|terms| / |Σ| ≈ √16 · 1 / 0.01 = 400.
  JudgedTensor in, out;
  in.compared = true, in.reference = DType::kF32, in.numel = 1600, in.rms = 1;
  out.compared = true, out.output = true, out.reference = DType::kF32, out.numel = 100, out.rms = 0.01;
  EXPECT_NEAR(Amplification("sum", {in, out}, out), 400, 1e-9);
  // An elementwise product does not amplify relative error.
  JudgedTensor x = in, w = in;
  x.numel = w.numel = 100, out.rms = 1e-6;
  EXPECT_EQ(Amplification("mul", {x, w, out}, out), 1);
  // A matrix product [8,64]x[64,8]: 64 terms per output.
  JudgedTensor a = in, b = in, c = out;
  a.numel = b.numel = 512, c.numel = 64, c.rms = 8;  // √64 · 1 · 1 / 8 = 1: no cancellation
  EXPECT_NEAR(Amplification("mm", {a, b, c}, c), 1, 1e-9);
  c.rms = 0.08;
  EXPECT_NEAR(Amplification("mm", {a, b, c}, c), 100, 1e-9);
}

TEST_F(JudgeTest, AProductIsNotASumOfItsLargestOperand) {
  // A weight gradient in the backward pass: mm(grad [32,16] of rms 1.6e-10, activation [16,64] of
  // rms 0.02) → [32,64] of rms 1.9e-12 (cancelling). The output has fewer elements than the
  // activation, but it is a product of both, in the gradient's units: only the pair rule applies
  // (√T · 1.6e-10 · 0.02 / 1.9e-12 ≈ 9.5 with T = √(512·2048/1024) = 32 terms), not the sum of the
  // activation's elements, √(2048/1024) · 0.02 / 1.9e-12 ≈ 1.5e10.
  JudgedTensor g, w, out;
  g.compared = w.compared = true, g.reference = w.reference = DType::kF32;
  g.numel = 512, g.rms = 1.6e-10, w.numel = 2048, w.rms = 0.02;
  out.compared = true, out.output = true, out.reference = DType::kF32, out.numel = 1024, out.rms = 1.9e-12;
  const double pair = std::sqrt(32.0) * 1.6e-10 * 0.02 / 1.9e-12;
  EXPECT_NEAR(Amplification("mm", {g, w, out}, out), pair, 1e-6 * pair);
  // A backward operator's output that sums its largest input (a bias gradient) keeps that rule.
  JudgedTensor go = w, bias = out;
  go.rms = 1, bias.numel = 16, bias.rms = 0.1;
  EXPECT_NEAR(Amplification("convolution_backward", {go, bias}, bias), std::sqrt(128.0) * 1 / 0.1, 1e-9);
}

TEST_F(JudgeTest, ABackwardOperatorsTermsAreItsIncomingGradientTimesAnOperand) {
  // native_layer_norm_backward(grad 1e-5, x 0.03, mean, rstd 34, weight 1, bias): the output is
  // linear in the gradient. The pair (rstd, weight), 34 · 1 against an output of 2e-4, is not a
  // term of it and would allow 1.5e5 times the rounding.
  auto tensor = [](const char* key, double numel, double rms) {
    JudgedTensor t;
    t.key = key, t.compared = true, t.reference = DType::kF32, t.numel = numel, t.rms = rms;
    return t;
  };
  JudgedTensor g = tensor("input.0", 512, 6.9e-6), x = tensor("input.1", 512, 0.03), rstd = tensor("input.3", 16, 33.8),
               w = tensor("input.4", 32, 1), out = tensor("output.0", 512, 2.2e-4);
  out.output = true;
  const double a = Amplification("native_layer_norm_backward", {g, x, rstd, w, out}, out);
  // The largest term with the gradient: (g, x) with √(512·512/512) terms.
  const double gx = std::sqrt(std::sqrt(512.0)) * 6.9e-6 * 0.03 / 2.2e-4;
  const double grstd = std::sqrt(4.0) * 6.9e-6 * 33.8 / 2.2e-4;
  EXPECT_NEAR(a, std::max({1.0, gx, grstd}), 1e-9);
  EXPECT_LT(a, 10);
}

TEST_F(JudgeTest, RoundingBelowTheNormalRangeIsAbsolute) {
  // fp16 values of rms 3.2e-6 lie below fp16's normal range (6.1e-5): the spacing there is 2^-24,
  // half of which is 2^-25 / 3.2e-6 ≈ 9.3e-3 of the rms, far more than the unit roundoff 2^-11.
  EXPECT_NEAR(Rounding(DType::kF16, 3.2e-6), 0x1p-11 + 0x1p-25 / 3.2e-6, 1e-12);
  EXPECT_DOUBLE_EQ(Rounding(DType::kF16, 0), 0x1p-11);
  EXPECT_NEAR(Rounding(DType::kF32, 1), 0x1p-24, 1e-20);
  EXPECT_EQ(SubnormalRounding(DType::kI32), 0);
}

TEST_F(JudgeTest, ANormalisationIsConditionedByItsNarrowestGroup) {
  // native_batch_norm of x (rms 0.7, spread 0.7 over the whole tensor) whose narrowest channel
  // has σ 0.003: saved 1/σ up to 316. An absolute error in x grows by 0.7 · 316 there.
  JudgedTensor x, out, mean, invstd;
  x.key = "input.0", x.compared = true, x.reference = DType::kF32, x.numel = 1024, x.rms = 0.7;
  out.key = "output.0", out.output = true, out.compared = true, out.reference = DType::kF32;
  out.numel = 1024, out.rms = 1;
  mean = out, mean.key = "output.1", mean.numel = 8, mean.rms = 0.1;
  invstd = mean, invstd.key = "output.2", invstd.rms = 50, invstd.max_magnitude = 316;
  EXPECT_NEAR(Amplification("native_batch_norm", {x, out, mean, invstd}, invstd), 0.7 * 316, 1e-9);
  // Without saved statistics (eval mode, empty outputs) the whole tensor's spread decides.
  invstd.numel = 0, invstd.compared = false;
  EXPECT_NEAR(Amplification("native_batch_norm", {x, out, mean, invstd}, out), 1, 1e-9);
}

TEST_F(JudgeTest, AOneUlpDifferenceInAHugeMaskIsNotACulprit) {
  // A causal mask of -3.4e38 (min float) built by `mul_` from identical inputs, one ulp apart in
  // the target: its absolute error (1e31) makes the row No, but its relative error is one
  // rounding, so the operator is not named.
  std::vector<float> mask(64), bad(64), keep(64);
  for (size_t e = 0; e < mask.size(); ++e) {
    keep[e] = e % 3 ? 1.0f : 0.0f;
    mask[e] = -3.4028234e38f * keep[e];
    bad[e] = e % 2 ? std::nextafter(mask[e], 0.0f) : mask[e];
  }
  std::vector<float> m(64, -3.4028234e38f);
  TestOp ref{"aten::mul_", "forward", {F32("input.0", m), F32("input.1", keep), F32("output.0", mask)}};
  TestOp tgt{"aten::mul_", "forward", {F32("input.0", m), F32("input.1", keep), F32("output.0", bad)}};
  auto r = CompareDumps({ref}, {tgt});
  bool row_no = false;
  for (const auto& row : r.rows) row_no = row_no || (row.output && row.verdict == Verdict::kNo);
  EXPECT_TRUE(row_no);
  EXPECT_FALSE(r.first_divergence.has_value()) << r.first_divergence_evidence;
}

TEST_F(JudgeTest, AReductionOfCoarserInputsMayAccumulateInTheirType) {
  // sum over rows of 16 of a bf16 input into an fp32 output (a norm's weight gradient under
  // autocast): a kernel keeping its sums in bf16 differs from the fp32 baseline on the same inputs
  // by about a bf16 rounding. That is allowed; a wrong kernel (10 % of the RMS) is still named.
  std::vector<float> x = Normal(512, 3), q(512);
  for (size_t e = 0; e < x.size(); ++e) q[e] = RoundBf16(x[e]);
  auto sums = [&](bool bf16_accumulation, double noise) {
    std::vector<float> y(32);
    auto n = Normal(32, 99);
    for (size_t r = 0; r < 32; ++r) {
      float s = 0;
      for (size_t c = 0; c < 16; ++c) s += q[r * 16 + c];
      y[r] = static_cast<float>((bf16_accumulation ? RoundBf16(s) : s) + noise * 4 * n[r]);
    }
    return y;
  };
  std::vector<float> exact(32);
  for (size_t r = 0; r < 32; ++r)
    for (size_t c = 0; c < 16; ++c) exact[r] += x[r * 16 + c];
  for (double noise : {0.0, 0.1}) {
    TestOp ref{"aten::sum", "forward", {F32("input.0", x), F32("output.0", exact)}};
    TestOp tgt{"aten::sum",
               "forward",
               {Bf16("input.0", x), F32("output.0", sums(true, noise)), F32("replay.output.0", sums(true, noise)),
                F32("replay.baseline.output.0", sums(false, 0))}};
    tgt.replay = "{\"status\": \"ok\", \"reference_index\": 0}";
    auto r = CompareDumps({ref}, {tgt});
    EXPECT_EQ(r.first_divergence.has_value(), noise > 0) << noise << ": " << r.first_divergence_evidence;
  }
}

TEST_F(JudgeTest, AnOperatorFedOtherIndicesIsNotBlamedForErrorGrowth) {
  // An embedding whose weight is identical and whose positions differ (a float position of
  // 2.9999998 truncated to 2 upstream): its output differs wholly, but that is no growth of a
  // relative input error. Without replay it is the start of drift, not a culprit.
  std::vector<float> w = Normal(64, 5);  // 16 rows of 4
  std::vector<int64_t> pos = {0, 1, 2, 3, 4, 5, 6, 7}, other = {0, 1, 1, 3, 4, 4, 6, 7};
  auto lookup = [&](const std::vector<int64_t>& p) {
    std::vector<float> y;
    for (int64_t r : p)
      for (int c = 0; c < 4; ++c) y.push_back(w[static_cast<size_t>(r) * 4 + c]);
    return y;
  };
  TestOp ref{"aten::embedding", "forward", {F32("input.0", w), I64("input.1", pos), F32("output.0", lookup(pos))}};
  TestOp tgt{"aten::embedding", "forward", {F32("input.0", w), I64("input.1", other), F32("output.0", lookup(other))}};
  auto r = CompareDumps({ref}, {tgt});
  EXPECT_FALSE(r.first_divergence.has_value()) << r.first_divergence_evidence;
  EXPECT_EQ(r.divergence_state, DivergenceState::kDrift);
}

}  // namespace
}  // namespace portkit::accuracy
