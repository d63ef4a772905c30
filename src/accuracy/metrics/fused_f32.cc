// The fused pass over fp32 pairs (MetricSet::AccumulateF32): every metric and both sides'
// statistics of a chunk from the fp32 values as they lie in the dump, widened to double in
// registers, instead of decoding the chunk into two double arrays, writing the element errors
// into two more, and running each metric's loop over them (a dozen passes, each a load and an
// add or two per element, and a logarithm loop that could not hide its two divisions).
//
// Each sum is formed exactly as the metric's own AVX2 loop forms it over the decoded chunk — lane
// k of four takes the elements i ≡ k (mod 4) in order, the same expressions (so the same fused
// multiply-adds), the same reduction of the lanes — so the results are the same to the bit
// (compare_exact_test.cc: Fp32FusedPassEqualsTheGeneralLoopsToTheBit). Two loops share the chunk,
// which stays in L1: the first the statistics, the dot product and the magnitude sums, the second
// the element errors and the KL sums. The second is bound by its two double divisions per element
// (RE's and the KL logarithm's), which the rest of its arithmetic overlaps.
#include <cstdint>
#include <cstring>
#include <tuple>
#include <utility>

#include "accuracy/metrics/metric.h"
#include "accuracy/metrics/simd.h"

#ifdef PORTKIT_ACCURACY_AVX2
#include <immintrin.h>
#endif

namespace portkit::accuracy {

#ifdef PORTKIT_ACCURACY_AVX2
namespace {

using simd::Abs;
using simd::Sum;
using simd::V4d;
using simd::V4i;

/// Elements i .. i+3 of little-endian fp32 bytes (any alignment), as doubles: one vcvtps2pd from
/// memory (a memcpy into a vector of four floats made the compiler bounce them through the stack).
PORTKIT_AVX2_FN inline V4d LoadF32(const uint8_t* p, size_t i) {
  return reinterpret_cast<V4d>(_mm256_cvtps_pd(_mm_loadu_ps(reinterpret_cast<const float*>(p + 4 * i))));
}

/// Select(v > m, v, m) in one instruction: vmaxpd returns its second operand unless the first is
/// greater (so on equal values, zeros of either sign and nan alike).
PORTKIT_AVX2_FN inline V4d MaxKeep(V4d v, V4d m) { return reinterpret_cast<V4d>(_mm256_max_pd(v, m)); }
/// Select(v < m, v, m), likewise with vminpd.
PORTKIT_AVX2_FN inline V4d MinKeep(V4d v, V4d m) { return reinterpret_cast<V4d>(_mm256_min_pd(v, m)); }

PORTKIT_AVX2_FN inline double MaxLanes(V4d v) {
  double a = v[0] > v[1] ? v[0] : v[1], b = v[2] > v[3] ? v[2] : v[3];
  return a > b ? a : b;
}
PORTKIT_AVX2_FN inline double StdMaxLanes(V4d v) {
  auto mx = [](double x, double y) { return x < y ? y : x; };  // std::max
  return mx(mx(v[0], v[1]), mx(v[2], v[3]));
}
PORTKIT_AVX2_FN inline double StdMinLanes(V4d v) {
  auto mn = [](double x, double y) { return y < x ? y : x; };  // std::min
  return mn(mn(v[0], v[1]), mn(v[2], v[3]));
}

/// Statistics (compare.cc's TensorStats), the dot products (cosine.cc) and the sums of magnitudes
/// (kl_divergence.cc) of count (a multiple of 4) elements.
PORTKIT_AVX2_FN void StatsAndDots(const uint8_t* n, const uint8_t* b, size_t count, FusedSums& s) {
  V4d nmx = V4d{} + s.n_max, nmn = V4d{} + s.n_min, bmx = V4d{} + s.b_max, bmn = V4d{} + s.b_min;
  V4d ns{}, nq{}, bs{}, bq{}, dot{}, an{}, ab{};
  for (size_t i = 0; i < count; i += 4) {
    V4d x = LoadF32(n, i), y = LoadF32(b, i);
    nmx = MaxKeep(x, nmx), nmn = MinKeep(x, nmn), ns += x, nq += x * x;
    bmx = MaxKeep(y, bmx), bmn = MinKeep(y, bmn), bs += y, bq += y * y;
    dot += x * y;
    an += Abs(x), ab += Abs(y);
  }
  s.n_max = StdMaxLanes(nmx), s.n_min = StdMinLanes(nmn), s.b_max = StdMaxLanes(bmx), s.b_min = StdMinLanes(bmn);
  // + 0.0: the empty scalar tails of the per-metric loops (they turn a −0 sum into +0).
  s.n_sum = Sum(ns) + (0.0 + 0.0), s.n_sq = Sum(nq) + (0.0 + 0.0);
  s.b_sum = Sum(bs) + (0.0 + 0.0), s.b_sq = Sum(bq) + (0.0 + 0.0);
  s.dot = Sum(dot);
  s.abs_n = Sum(an), s.abs_b = Sum(ab);
}

/// 2^−ulp_exp for the fp32 ulps of four fp32 values (raw bits), as ulp_error.cc computes it from
/// their doubles: the ulp exponent is E − 150 for a biased exponent field E ≥ 1 and −149 for zeros
/// and subnormals (E = 0), so 2^−ulp_exp has the double exponent field 1023 + 150 − max(E, 1).
PORTKIT_AVX2_FN inline V4d InverseUlpF32(__m128i bits) {
  __m128i e = _mm_and_si128(_mm_srli_epi32(bits, 23), _mm_set1_epi32(0xff));
  __m128i field = _mm_sub_epi32(_mm_set1_epi32(1173), _mm_max_epi32(e, _mm_set1_epi32(1)));
  return reinterpret_cast<V4d>(_mm256_slli_epi64(_mm256_cvtepi32_epi64(field), 52));
}

/// The running values of the element-error metrics over a chunk. Counts go in integers (the
/// per-metric loops add 1.0s, exact in a double, so the same values), two to a lane: the low 32
/// bits count RE < 0.001 and small reference values, the high 32 RE < 0.005 and small values
/// outside the tolerance (at most 1,024 each).
struct ErrorLanes {
  V4d sq{}, max_abs{}, sum_abs{}, max_rel{}, sum_rel{}, max_ulp{};
  V4i within{}, small{};

  /// Elements i .. i+3 (errors.cc, ulp_error.cc and small_value.cc for an fp32 target).
  PORTKIT_AVX2_FN void Add(const uint8_t* n, const uint8_t* b, size_t i) {
    const double small_value = 0x1p-20, atol = 0x1p-30;  // ToleranceFor(kF32)
    __m128i y_bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4 * i));
    V4d x = LoadF32(n, i), y = reinterpret_cast<V4d>(_mm256_cvtps_pd(_mm_castsi128_ps(y_bits)));
    V4d d = Abs(x - y);  // finite: x == y gives +0, as the general loop's select does
    V4d scale = Abs(y);
    V4d r = d / MaxKeep(scale, V4d{} + kRelGuard);
    sq += d * d;
    max_abs = MaxKeep(d, max_abs), sum_abs += d;
    max_rel = MaxKeep(r, max_rel), sum_rel += r;
    within -= (r < 0.001), within -= (r < 0.005) << 32;
    max_ulp = MaxKeep(d * InverseUlpF32(y_bits), max_ulp);
    V4i is_small = scale < small_value;
    small -= is_small, small -= (is_small & ~(d <= atol)) << 32;
  }
};

/// The low and high 32-bit halves of the lanes, each summed.
PORTKIT_AVX2_FN inline std::pair<double, double> SumHalves(V4i v) {
  int64_t low = 0, high = 0;
  for (int k = 0; k < 4; ++k) low += v[k] & 0xffffffff, high += v[k] >> 32;
  return {static_cast<double>(low), static_cast<double>(high)};
}

/// The element-error metrics and the KL sums of count (a multiple of 8) finite elements, in one
/// loop: the pass is bound by its divisions (RE's and the logarithm's, one each per element), and
/// the logarithm's other arithmetic runs while the divider is busy. The values are finite fp32, so
/// every ratio is a normal double and LogRatio4 cannot fail (a chunk with inf or nan is dropped
/// anyway).
PORTKIT_AVX2_FN void ErrorsAndKl(const uint8_t* n, const uint8_t* b, size_t count, FusedSums& s) {
  constexpr double kEps = 1e-10;
  ErrorLanes e;
  V4d kl0{}, kl1{};
  for (size_t i = 0; i < count; i += 8) {
    // The next chunk of a tensor usually follows this one: ask for it now, so that its first pass
    // (StatsAndDots, the first to touch it) does not wait on memory; the divisions leave room for
    // the loads. A prefetch past the data never faults.
    _mm_prefetch(reinterpret_cast<const char*>(n + 4 * (i + count)), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + 4 * (i + count)), _MM_HINT_T0);
    e.Add(n, b, i);
    e.Add(n, b, i + 4);
    V4d ax0 = Abs(LoadF32(n, i)), ay0 = Abs(LoadF32(b, i));
    V4d ax1 = Abs(LoadF32(n, i + 4)), ay1 = Abs(LoadF32(b, i + 4));
    V4d l0, l1;
    (void)simd::LogRatio4(ay0 + kEps, ax0 + kEps, l0);
    (void)simd::LogRatio4(ay1 + kEps, ax1 + kEps, l1);
    kl0 += ay0 * l0;
    kl1 += ay1 * l1;
  }
  V4d kl = kl0 + kl1;
  s.b_log_ratio = ((kl[0] + kl[1]) + (kl[2] + kl[3]) + 0.0) + 0.0;
  s.err_sq = Sum(e.sq);
  s.max_abs = MaxLanes(e.max_abs), s.sum_abs = Sum(e.sum_abs);
  s.max_rel = MaxLanes(e.max_rel), s.sum_rel = Sum(e.sum_rel);
  std::tie(s.within_1e3, s.within_5e3) = SumHalves(e.within);
  s.max_ulp = StdMaxLanes(e.max_ulp);
  std::tie(s.small, s.small_bad) = SumHalves(e.small);
}

}  // namespace

bool FusedChunkF32(const uint8_t* n, const uint8_t* b, size_t count, FusedSums& sums) {
  FusedSums s;
  s.n_max = sums.n_max, s.n_min = sums.n_min, s.b_max = sums.b_max, s.b_min = sums.b_min;
  StatsAndDots(n, b, count, s);
  // A sum of finite fp32 values cannot overflow a double: a non-finite one means inf or nan in the
  // data, which the general loops handle.
  if (!__builtin_isfinite(s.n_sum) || !__builtin_isfinite(s.b_sum)) return false;
  ErrorsAndKl(n, b, count, s);
  sums = s;
  return true;
}

#else

bool FusedChunkF32(const uint8_t*, const uint8_t*, size_t, FusedSums&) { return false; }

#endif

}  // namespace portkit::accuracy
