// Metrics against direct double computations, including nan, inf, zeros and denormals; dtype
// decoding; the safetensors reader on good and lying files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>

#include "accuracy/dtype.h"
#include "accuracy/metrics/metric.h"
#include "accuracy/metrics/simd.h"
#include "accuracy/safetensors.h"

namespace portkit::accuracy {
namespace {

std::map<std::string, double> Compute(const std::vector<double>& n, const std::vector<double>& b,
                                      DType target = DType::kF32, size_t chunk = 3) {
  MetricSet metrics(target);
  for (size_t i = 0; i < n.size(); i += chunk) {
    size_t c = std::min(chunk, n.size() - i);
    metrics.Accumulate(n.data() + i, b.data() + i, c);
  }
  return metrics.Results();
}

TEST(Metrics, MatchDirectComputation) {
  std::vector<double> b = {1.0, -2.0, 3.5, 0.25, 1e-3, 7.0, -0.5};
  std::vector<double> n = {1.001, -2.0, 3.49, 0.25, 1.2e-3, 7.0, -0.4995};
  double dot = 0, nn = 0, bb = 0, sq = 0, maxabs = 0, maxrel = 0, sumabs = 0, sumrel = 0;
  size_t t1 = 0, t5 = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    dot += n[i] * b[i], nn += n[i] * n[i], bb += b[i] * b[i];
    double d = std::fabs(n[i] - b[i]), r = d / std::max(std::fabs(b[i]), 1e-10);
    sq += d * d, maxabs = std::max(maxabs, d), maxrel = std::max(maxrel, r), sumabs += d, sumrel += r;
    t1 += r < 0.001, t5 += r < 0.005;
  }
  auto m = Compute(n, b);
  EXPECT_NEAR(m["Cosine"], dot / std::sqrt(nn * bb), 1e-12);
  EXPECT_NEAR(m["EucDist"], std::sqrt(sq), 1e-12);
  EXPECT_NEAR(m["MaxAbsErr"], maxabs, 1e-15);
  EXPECT_NEAR(m["MaxRelativeErr"], maxrel, 1e-12);
  EXPECT_NEAR(m["One Thousandth Err Ratio"], static_cast<double>(t1) / 7, 1e-15);
  EXPECT_NEAR(m["Five Thousandths Err Ratio"], static_cast<double>(t5) / 7, 1e-15);
  EXPECT_NEAR(m["RMSE"], std::sqrt(sq / 7), 1e-12);
  EXPECT_NEAR(m["MeanAbsErr"], sumabs / 7, 1e-15);
  EXPECT_NEAR(m["MeanRelErr"], sumrel / 7, 1e-12);
  // KL over normalised magnitudes, computed the two-pass way.
  double sb = 0, sn = 0, kl = 0;
  for (size_t i = 0; i < b.size(); ++i) sb += std::fabs(b[i]), sn += std::fabs(n[i]);
  for (size_t i = 0; i < b.size(); ++i) {
    double p = std::fabs(b[i]) / sb;
    kl += p * std::log((std::fabs(b[i]) + 1e-10) / (std::fabs(n[i]) + 1e-10));
  }
  kl += -std::log(sb) + std::log(sn);
  EXPECT_NEAR(m["KLDivergence"], kl, 1e-12);
}

TEST(Metrics, KlDivergenceOverManyMagnitudes) {
  // Long enough for the vectorised path (8 at a time) plus a scalar tail; values from 1e-12 to 1e6
  // and zeros, so every exponent range of the logarithm is used.
  std::vector<double> n, b;
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  };
  for (int i = 0; i < 1003; ++i) {
    double mag = std::pow(10.0, -12 + 18 * next());
    double v = (next() < 0.5 ? -1 : 1) * mag;
    b.push_back(i % 97 == 0 ? 0.0 : v);
    n.push_back(i % 89 == 0 ? 0.0 : v * (1 + 0.01 * (next() - 0.5)));
  }
  double sb = 0, sn = 0, kl = 0;
  for (size_t i = 0; i < b.size(); ++i) sb += std::fabs(b[i]), sn += std::fabs(n[i]);
  for (size_t i = 0; i < b.size(); ++i)
    kl += std::fabs(b[i]) / sb * std::log((std::fabs(b[i]) + 1e-10) / (std::fabs(n[i]) + 1e-10));
  kl += -std::log(sb) + std::log(sn);
  EXPECT_NEAR(Compute(n, b, DType::kF32, 1024)["KLDivergence"], kl, 1e-12 * std::max(1.0, kl));
  EXPECT_NEAR(Compute(n, b, DType::kF32, 13)["KLDivergence"], kl, 1e-12 * std::max(1.0, kl));
  // fp64 extremes whose ratio leaves the normal range take the exact path (here: an infinite ratio).
  std::vector<double> big(16, 1e300), tiny(16, 1e-300);
  // (1e300 + ε) / (1e-300 + ε) = 1e310 overflows to inf, as with std::log on every element.
  EXPECT_TRUE(std::isinf(Compute(tiny, big, DType::kF64, 16)["KLDivergence"]));
}

TEST(Metrics, UlpErrorOverManyElementsMatchesFrexp) {
  // Long enough for the vectorised path; zeros, denormal-range and large references included.
  for (auto [t, mant, floor_exp] :
       {std::tuple{DType::kF32, 23, -149}, std::tuple{DType::kF16, 10, -24}, std::tuple{DType::kBF16, 7, -133}}) {
    std::vector<double> n, b;
    double expected = 0;
    for (int i = 0; i < 1001; ++i) {
      double ref = i % 50 == 0 ? 0.0 : std::ldexp(1.0 + (i % 13) / 16.0, (i * 37) % 200 - 150) * (i % 2 ? -1 : 1);
      double err = std::ldexp(1.0, (i * 11) % 60 - 170) * (1 + i % 5);
      b.push_back(ref), n.push_back(ref + err);
      double d = std::fabs((ref + err) - ref);
      int e = 0;
      if (ref != 0) std::frexp(ref, &e), e -= 1;
      else e = floor_exp + mant;
      expected = std::max(expected, d / std::ldexp(1.0, std::max(e - mant, floor_exp)));
    }
    EXPECT_DOUBLE_EQ(Compute(n, b, t, 1024)["MaxULPErr"], expected) << static_cast<int>(t);
    EXPECT_DOUBLE_EQ(Compute(n, b, t, 7)["MaxULPErr"], expected) << static_cast<int>(t);
  }
}

TEST(Metrics, SmallValueErrRatioUsesTheTargetTypesTolerances) {
  // fp32: |B| < 2^-20 is small, judged against 2^-30 absolute error; large elements do not count.
  double nan = std::numeric_limits<double>::quiet_NaN();
  auto f32 = Compute({1e-7 + 1e-10, 5e-7 + 1e-8, 2.0, nan}, {1e-7, 5e-7, 1.0, 1e-8}, DType::kF32);
  EXPECT_DOUBLE_EQ(f32["SmallValueErrRatio"], 2.0 / 3);  // 5e-7 is off by 1e-8 > 2^-30; the nan fails
  // fp16/bf16: small below 2^-10, tolerance 2^-16 (1.5e-5): the same errors now pass.
  auto f16 = Compute({1e-7 + 1e-10, 5e-7 + 1e-8, 2.0}, {1e-7, 5e-7, 1.0}, DType::kF16);
  EXPECT_DOUBLE_EQ(f16["SmallValueErrRatio"], 0.0);
  EXPECT_DOUBLE_EQ(Compute({3.0}, {3.0}, DType::kBF16)["SmallValueErrRatio"], 0.0);  // no small elements
  EXPECT_DOUBLE_EQ(ToleranceFor(DType::kBF16).ulp, 1.0);
  EXPECT_DOUBLE_EQ(ToleranceFor(DType::kF32).ulp, 32.0);
  // Denormal fp32 references are small; zero error passes.
  double denormal = std::ldexp(1.0, -140);
  EXPECT_DOUBLE_EQ(Compute({denormal}, {denormal}, DType::kF32)["SmallValueErrRatio"], 0.0);
}

// The AVX2 loops (when this CPU has them) and the scalar loops give the same metrics, up to the
// order of summation; nan, inf, zeros and small values included, and lengths that leave tails.
TEST(Metrics, VectorAndScalarLoopsAgree) {
  double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (size_t len : {3u, 8u, 1001u, 4099u}) {
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      std::vector<double> n, b;
      for (size_t i = 0; i < len; ++i) {
        double ref = std::sin(static_cast<double>(i) * 0.7) * std::pow(10.0, static_cast<double>(i % 9) - 6);
        b.push_back(i % 31 == 0 ? 0.0 : ref);
        n.push_back(ref * (1 + 1e-3 * std::cos(static_cast<double>(i))) + (i % 17 == 0 ? 1e-9 : 0.0));
      }
      for (int special = 0; special < 2; ++special) {
        if (special == 1 && len > 8) n[len / 2] = nan, b[len / 3] = inf;
        MetricSet vec(t, true), sca(t, false);
        vec.Accumulate(n.data(), b.data(), n.size());
        sca.Accumulate(n.data(), b.data(), n.size());
        auto a = vec.Results(), c = sca.Results();
        for (const auto& [name, v] : c) {
          if (std::isnan(v)) {
            EXPECT_TRUE(std::isnan(a[name])) << name << " len " << len;
          } else {
            EXPECT_NEAR(a[name], v, 1e-12 * std::max(1.0, std::fabs(v))) << name << " len " << len;
          }
        }
      }
    }
  }
}

TEST(Metrics, MergedPartsEqualOnePass) {
  std::vector<double> n, b;
  for (int i = 0; i < 3000; ++i) b.push_back(std::sin(i * 0.37) * (1 + i % 7)), n.push_back(b.back() * 1.001 + 1e-4);
  MetricSet whole(DType::kF32), first(DType::kF32), second(DType::kF32);
  whole.Accumulate(n.data(), b.data(), n.size());
  first.Accumulate(n.data(), b.data(), 1024);
  second.Accumulate(n.data() + 1024, b.data() + 1024, n.size() - 1024);
  first.Merge(second);
  auto a = whole.Results(), c = first.Results();
  for (const auto& [name, v] : a) EXPECT_NEAR(c[name], v, 1e-12 * std::max(1.0, std::fabs(v))) << name;
}

TEST(Metrics, IdenticalAndZeroTensors) {
  auto same = Compute({1, 2, 3}, {1, 2, 3});
  EXPECT_DOUBLE_EQ(same["Cosine"], 1.0);
  EXPECT_DOUBLE_EQ(same["MaxAbsErr"], 0.0);
  EXPECT_DOUBLE_EQ(same["One Thousandth Err Ratio"], 1.0);
  EXPECT_DOUBLE_EQ(same["MaxULPErr"], 0.0);
  EXPECT_DOUBLE_EQ(same["KLDivergence"], 0.0);
  auto zeros = Compute({0, 0}, {0, 0});
  EXPECT_DOUBLE_EQ(zeros["Cosine"], 1.0);
  EXPECT_DOUBLE_EQ(zeros["MaxRelativeErr"], 0.0);
  EXPECT_DOUBLE_EQ(zeros["KLDivergence"], 0.0);
  auto one_zero = Compute({0, 0}, {1, 0});
  EXPECT_DOUBLE_EQ(one_zero["Cosine"], 0.0);
  EXPECT_TRUE(std::isinf(one_zero["KLDivergence"]));
  // A reference zero divides by the 1e-10 guard, not by zero.
  auto guard = Compute({1e-12}, {0});
  EXPECT_NEAR(guard["MaxRelativeErr"], 1e-2, 1e-15);
}

TEST(Metrics, NanAndInfPropagate) {
  double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  auto with_nan = Compute({1, nan, 3}, {1, 2, 3});
  EXPECT_TRUE(std::isnan(with_nan["Cosine"]));
  EXPECT_TRUE(std::isnan(with_nan["MaxAbsErr"]));
  EXPECT_TRUE(std::isnan(with_nan["MaxULPErr"]));
  EXPECT_NEAR(with_nan["One Thousandth Err Ratio"], 2.0 / 3, 1e-15);  // the nan element is not within
  auto with_inf = Compute({1, inf, 3}, {1, 2, 3});
  EXPECT_TRUE(std::isinf(with_inf["MaxAbsErr"]));
  EXPECT_TRUE(std::isnan(with_inf["Cosine"]));
  auto both_inf = Compute({inf}, {inf});
  EXPECT_DOUBLE_EQ(both_inf["MaxAbsErr"], 0.0);  // the same infinity on both sides
}

TEST(Metrics, UlpErrorPerTargetType) {
  // 1.0 has ulp 2^-23 in fp32, 2^-10 in fp16, 2^-7 in bf16.
  double b = 1.0, n = 1.0 + std::ldexp(1.0, -10);
  EXPECT_DOUBLE_EQ(Compute({n}, {b}, DType::kF32)["MaxULPErr"], 8192.0);
  EXPECT_DOUBLE_EQ(Compute({n}, {b}, DType::kF16)["MaxULPErr"], 1.0);
  EXPECT_DOUBLE_EQ(Compute({n}, {b}, DType::kBF16)["MaxULPErr"], 0.125);
  // Denormal references use the smallest ulp of the type (fp32: 2^-149).
  double tiny = std::ldexp(1.0, -140);
  EXPECT_DOUBLE_EQ(Compute({tiny + std::ldexp(1.0, -149)}, {tiny}, DType::kF32)["MaxULPErr"], 1.0);
}

#ifdef PORTKIT_ACCURACY_AVX2
/// LogRatio4's four lanes for the pairs a[k], c[k] (AVX2 code, only called when the CPU has it).
PORTKIT_AVX2_FN std::array<double, 4> LogRatioLanes(const double* a, const double* c, bool& ok) {
  simd::V4d out;
  ok = simd::LogRatio4(simd::Load(a), simd::Load(c), out);
  return {out[0], out[1], out[2], out[3]};
}

// The KL term's logarithm of a ratio (simd::LogRatio4) against a long double reference: within a
// few ulps of ln(a/c) itself, also for ratios within 1e-3 of 1, where the logarithm of the rounded
// ratio fl(a/c) is off by up to 1.1e-16 absolute (1e-13 relative); ratios outside [√½, √2] (the
// Log4 lanes) within a few ulps plus the ratio's rounding; fp64 extremes and inf / nan refused.
TEST(Metrics, LogOfARatioIsWithinAFewUlpsOfTheExactRatiosLogarithm) {
  if (!VectorLoopsAvailable()) GTEST_SKIP() << "no AVX2";
  uint64_t state = 7;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  };
  double worst_close = 0, worst_far = 0;
  for (int i = 0; i < 20000; ++i) {
    double a[4], c[4];
    const bool close = i % 4 != 3;
    for (int k = 0; k < 4; ++k) {
      a[k] = std::ldexp(0.5 + next(), static_cast<int>(next() * 200) - 100);
      const double rel = close ? std::pow(10.0, -12 + 11 * next()) * (next() < 0.5 ? -1 : 1) : 0.3 + 1e6 * next();
      c[k] = close ? a[k] * (1 + rel) : (next() < 0.5 ? a[k] * rel : a[k] / rel);
    }
    bool ok = false;
    auto got = LogRatioLanes(a, c, ok);
    ASSERT_TRUE(ok);
    for (int k = 0; k < 4; ++k) {
      // The reference in long double: 2·atanh((a−c)/(a+c)) near 1 (a−c and a+c exact there; the
      // logarithm of a long double ratio would be off by 5e-20 absolute, 5e7 ulps of a 1e-12
      // result), ln a − ln c elsewhere.
      const long double la = a[k], lc = c[k], s = (la - lc) / (la + lc);
      const long double exact = std::fabs(s) < 0.5 ? 2 * std::atanh(s) : std::log(la) - std::log(lc);
      const double ulps = static_cast<double>(std::fabs(got[static_cast<size_t>(k)] - exact) /
                                              (std::fabs(exact) * std::numeric_limits<double>::epsilon()));
      double& worst = std::fabs(a[k] / c[k] - 1) < 0.29 ? worst_close : worst_far;
      worst = std::max(worst, std::fabs(exact) < 1e-300 ? 0.0 : ulps);
    }
  }
  EXPECT_LT(worst_close, 4.0);  // in ulps of the result (epsilon = 2 ulps at the binade's bottom)
  EXPECT_LT(worst_far, 4.0);    // |ln| ≥ 0.26 here, so the ratio's rounding is below an ulp of it
  const double odd_a[4] = {1.0, INFINITY, 1.0, 1e-300}, odd_c[4] = {1.0, 1.0, NAN, 1e300};
  bool ok = true;
  (void)LogRatioLanes(odd_a, odd_c, ok);
  EXPECT_FALSE(ok);
}
#endif

TEST(DType, DecodesHalfBfloatAndFp8) {
  EXPECT_DOUBLE_EQ(HalfToDouble(0x3C00), 1.0);
  EXPECT_DOUBLE_EQ(HalfToDouble(0xC000), -2.0);
  EXPECT_DOUBLE_EQ(HalfToDouble(0x0001), std::ldexp(1.0, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(HalfToDouble(0x7C00)));
  EXPECT_TRUE(std::isnan(HalfToDouble(0x7E00)));
  EXPECT_DOUBLE_EQ(BFloat16ToDouble(0x3F80), 1.0);
  EXPECT_DOUBLE_EQ(BFloat16ToDouble(0x4049), 3.140625);
  EXPECT_DOUBLE_EQ(Fp8E4M3ToDouble(0x38), 1.0);
  EXPECT_DOUBLE_EQ(Fp8E4M3ToDouble(0x7E), 448.0);  // largest finite
  EXPECT_TRUE(std::isnan(Fp8E4M3ToDouble(0x7F)));
  EXPECT_DOUBLE_EQ(Fp8E5M2ToDouble(0x3C), 1.0);
  EXPECT_TRUE(std::isinf(Fp8E5M2ToDouble(0x7C)));
}

std::string Safetensors(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  // A name of this process's own, so checkouts testing at once on one machine do not collide.
  auto path = std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

TEST(Safetensors, ReadsTensorsAndMetadata) {
  float values[3] = {1.5f, -2.0f, 0.25f};
  std::string data(reinterpret_cast<const char*>(values), sizeof values);
  std::string path = WriteTemp("portkit_ok.safetensors",
                               Safetensors("{\"__metadata__\": {\"op\": \"conv1\"}, \"x\": {\"dtype\": \"F32\", "
                                           "\"shape\": [3], \"data_offsets\": [0, 12]}}",
                                           data));
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->tensors().size(), 1u);
  const TensorInfo& t = f->tensors().at("x");
  EXPECT_EQ(t.dtype, DType::kF32);
  EXPECT_EQ(t.numel(), 3u);
  double decoded[3];
  DecodeToDouble(t.dtype, f->Data(t), 3, decoded);
  EXPECT_DOUBLE_EQ(decoded[1], -2.0);
  EXPECT_EQ(f->metadata().at("op"), "conv1");
  std::filesystem::remove(path);
}

TEST(Safetensors, LyingOrTruncatedFilesAreErrorsNamingTheTensor) {
  std::string data(8, '\0');
  std::string lies =
      WriteTemp("portkit_lie.safetensors",
                Safetensors("{\"x\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", data));
  auto a = SafetensorsFile::Open(lies);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), lies + ": 'x': data_offsets [0, 16] outside the 8 data bytes (truncated file?)");
  std::string size =
      WriteTemp("portkit_size.safetensors",
                Safetensors("{\"x\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", data));
  auto b = SafetensorsFile::Open(size);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), size + ": 'x': 8 bytes for 3 elements of F32");
  std::string header = WriteTemp("portkit_hdr.safetensors", std::string("\xff\xff\0\0\0\0\0\0{}", 10));
  auto c = SafetensorsFile::Open(header);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("runs past the end of the file"), std::string::npos);
  // A shape whose byte count wraps around 2^64 (2^62 × 4 bytes ≡ 0) is not taken for 0 bytes.
  std::string wrap = WriteTemp("portkit_wrap.safetensors",
                               Safetensors("{\"x\": {\"dtype\": \"F32\", \"shape\": [4611686018427387904], "
                                           "\"data_offsets\": [0, 0]}}",
                                           data));
  auto d = SafetensorsFile::Open(wrap);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), wrap + ": 'x': 0 bytes for 4611686018427387904 elements of F32");
  for (const auto& p : {lies, size, header, wrap}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace portkit::accuracy
