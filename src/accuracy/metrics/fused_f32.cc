// The fused pass over fp32 pairs (MetricSet::AccumulateF32): every metric and both sides'
// statistics of a chunk from the fp32 values as they lie in the dump, widened to double in
// registers, instead of decoding the chunk into two double arrays, writing the element errors
// into two more, and running each metric's loop over them (a dozen passes, each a load and an
// add or two per element, and a logarithm loop that could not hide its two divisions).
//
// Each sum is formed exactly as the metric's own AVX2 loop forms it over the decoded chunk — lane
// k of four takes the elements i ≡ k (mod 4) in order, the same expressions (so the same fused
// multiply-adds), the same reduction of the lanes — so the results are the same to the bit
// (metrics_test.cc: FusedPassEqualsThePerMetricLoops). Two loops share the chunk, which stays in
// L1: the first the statistics, the dot product and the KL sums, the second the element errors,
// so neither runs out of the sixteen vector registers.
#include <cstdint>
#include <cstring>

#include "accuracy/metrics/metric.h"
#include "accuracy/metrics/simd.h"

namespace portkit::accuracy {

#ifdef PORTKIT_ACCURACY_AVX2
namespace {

using simd::Abs;
using simd::Select;
using simd::Sum;
using simd::V4d;
using simd::V4i;
using V4f = float __attribute__((vector_size(16)));

/// Elements i .. i+3 of little-endian fp32 bytes (any alignment), as doubles.
PORTKIT_AVX2_FN inline V4d LoadF32(const uint8_t* p, size_t i) {
  V4f v;
  std::memcpy(&v, p + 4 * i, sizeof v);
  return __builtin_convertvector(v, V4d);
}

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

/// Statistics (compare.cc's TensorStats), the dot products (cosine.cc) and the KL sums
/// (kl_divergence.cc) of count (a multiple of 8) elements.
PORTKIT_AVX2_FN void StatsDotsKl(const uint8_t* n, const uint8_t* b, size_t count, FusedSums& s) {
  constexpr double kEps = 1e-10;
  V4d nmx = V4d{} + s.n_max, nmn = V4d{} + s.n_min, bmx = V4d{} + s.b_max, bmn = V4d{} + s.b_min;
  V4d ns{}, nq{}, bs{}, bq{}, dot{}, an{}, ab{}, kl0{}, kl1{};
  for (size_t i = 0; i < count; i += 4) {
    V4d x = LoadF32(n, i), y = LoadF32(b, i);
    nmx = Select(x > nmx, x, nmx), nmn = Select(x < nmn, x, nmn), ns += x, nq += x * x;
    bmx = Select(y > bmx, y, bmx), bmn = Select(y < bmn, y, bmn), bs += y, bq += y * y;
    dot += x * y;
  }
  // The KL sums in a loop of their own: with the statistics' nine accumulators beside them the
  // logarithm's temporaries spill to the stack.
  for (size_t i = 0; i < count; i += 8) {
    V4d x0 = LoadF32(n, i), y0 = LoadF32(b, i), x1 = LoadF32(n, i + 4), y1 = LoadF32(b, i + 4);
    V4d ax0 = Abs(x0), ay0 = Abs(y0), ax1 = Abs(x1), ay1 = Abs(y1);
    an += ax0, ab += ay0;
    an += ax1, ab += ay1;
    V4d r0 = (ay0 + kEps) / (ax0 + kEps), r1 = (ay1 + kEps) / (ax1 + kEps);
    kl0 += ay0 * simd::Log4(r0);
    kl1 += ay1 * simd::Log4(r1);
  }
  s.n_max = StdMaxLanes(nmx), s.n_min = StdMinLanes(nmn), s.b_max = StdMaxLanes(bmx), s.b_min = StdMinLanes(bmn);
  // + 0.0: the empty scalar tails of the per-metric loops (they turn a −0 sum into +0).
  s.n_sum = Sum(ns) + (0.0 + 0.0), s.n_sq = Sum(nq) + (0.0 + 0.0);
  s.b_sum = Sum(bs) + (0.0 + 0.0), s.b_sq = Sum(bq) + (0.0 + 0.0);
  s.dot = Sum(dot);
  s.abs_n = Sum(an), s.abs_b = Sum(ab);
  V4d kl = kl0 + kl1;
  s.b_log_ratio = ((kl[0] + kl[1]) + (kl[2] + kl[3]) + 0.0) + 0.0;
}

/// The element-error metrics (errors.cc, ulp_error.cc and small_value.cc for an fp32 target) of
/// count (a multiple of 4) finite elements.
PORTKIT_AVX2_FN void ErrorMetrics(const uint8_t* n, const uint8_t* b, size_t count, FusedSums& s) {
  constexpr int64_t kMant = 23, kFloorExp = -149;      // fp32 ulps (ulp_error.cc)
  const double small_value = 0x1p-20, atol = 0x1p-30;  // ToleranceFor(kF32)
  const V4d one = V4d{} + 1.0;
  V4d sq{}, max_abs{}, sum_abs{}, max_rel{}, sum_rel{}, max_ulp{}, small{}, bad{};
  V4i within1{}, within5{};
  for (size_t i = 0; i < count; i += 4) {
    V4d x = LoadF32(n, i), y = LoadF32(b, i);
    V4d d = Abs(x - y);  // finite: x == y gives +0, as the general loop's select does
    V4d scale = Abs(y);
    V4d r = d / Select(scale > kRelGuard, scale, V4d{} + kRelGuard);
    sq += d * d;
    max_abs = Select(d > max_abs, d, max_abs), sum_abs += d;
    max_rel = Select(r > max_rel, r, max_rel), sum_rel += r;
    within1 -= r < 0.001, within5 -= r < 0.005;
    V4i exp_field = (reinterpret_cast<V4i>(y) >> 52) & 0x7ff;
    V4i odd = (exp_field == 0) | (exp_field == 0x7ff);
    V4i e = ((V4i{} + (kFloorExp + kMant)) & odd) | ((exp_field - 1023) & ~odd);
    V4i ulp_exp = e - kMant;
    V4i low = ulp_exp < kFloorExp;
    ulp_exp = ((V4i{} + kFloorExp) & low) | (ulp_exp & ~low);
    V4d u = d * reinterpret_cast<V4d>((1023 - ulp_exp) << 52);  // × 2^−ulp_exp
    max_ulp = Select(u > max_ulp, u, max_ulp);
    V4i is_small = scale < small_value;
    V4i ok = d <= atol;
    small += reinterpret_cast<V4d>(reinterpret_cast<V4i>(one) & is_small);
    bad += reinterpret_cast<V4d>(reinterpret_cast<V4i>(one) & is_small & ~ok);
  }
  s.err_sq = Sum(sq);
  s.max_abs = MaxLanes(max_abs), s.sum_abs = Sum(sum_abs);
  s.max_rel = MaxLanes(max_rel), s.sum_rel = Sum(sum_rel);
  s.within_1e3 = static_cast<double>(within1[0] + within1[1] + within1[2] + within1[3]);
  s.within_5e3 = static_cast<double>(within5[0] + within5[1] + within5[2] + within5[3]);
  s.max_ulp = StdMaxLanes(max_ulp);
  s.small = Sum(small), s.small_bad = Sum(bad);
}

}  // namespace

bool FusedChunkF32(const uint8_t* n, const uint8_t* b, size_t count, FusedSums& sums) {
  FusedSums s;
  s.n_max = sums.n_max, s.n_min = sums.n_min, s.b_max = sums.b_max, s.b_min = sums.b_min;
  StatsDotsKl(n, b, count, s);
  // A sum of finite fp32 values cannot overflow a double: a non-finite one means inf or nan in the
  // data, which the general loops handle.
  if (!__builtin_isfinite(s.n_sum) || !__builtin_isfinite(s.b_sum)) return false;
  ErrorMetrics(n, b, count, s);
  sums = s;
  return true;
}

#else

bool FusedChunkF32(const uint8_t*, const uint8_t*, size_t, FusedSums&) { return false; }

#endif

}  // namespace portkit::accuracy
