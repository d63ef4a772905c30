#pragma once
/// Four-double vectors for the hot loops of the metrics on x86-64 CPUs with AVX2 (GCC vector
/// extensions in functions compiled for AVX2, chosen at run time by CpuHasAvx2); other CPUs and
/// compilers take the scalar loops. PORTKIT_ACCURACY_AVX2 says whether the vector code exists.
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#define PORTKIT_ACCURACY_AVX2 1
#define PORTKIT_AVX2_FN __attribute__((target("avx2,fma")))

#include <immintrin.h>

namespace portkit::accuracy::simd {

using V4d = double __attribute__((vector_size(32)));
using V4i = int64_t __attribute__((vector_size(32)));

/// True when this CPU runs AVX2 and FMA code.
inline bool CpuHasAvx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

PORTKIT_AVX2_FN inline V4d Load(const double* p) {
  V4d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
PORTKIT_AVX2_FN inline void Store(double* p, V4d v) { std::memcpy(p, &v, sizeof v); }
PORTKIT_AVX2_FN inline V4d Abs(V4d v) { return reinterpret_cast<V4d>(reinterpret_cast<V4i>(v) & 0x7fffffffffffffffLL); }
/// mask ? a : b, lane by lane (mask lanes all ones or all zeros).
PORTKIT_AVX2_FN inline V4d Select(V4i mask, V4d a, V4d b) {
  return reinterpret_cast<V4d>((reinterpret_cast<V4i>(a) & mask) | (reinterpret_cast<V4i>(b) & ~mask));
}
PORTKIT_AVX2_FN inline double Sum(V4d v) { return (v[0] + v[1]) + (v[2] + v[3]); }
PORTKIT_AVX2_FN inline bool Any(V4i m) { return (m[0] | m[1] | m[2] | m[3]) != 0; }

/// The largest of `start` and x[0..c) ignoring nan; `nan` is set when one is seen.
PORTKIT_AVX2_FN inline double MaxOf(const double* x, size_t c, double start, bool& nan) {
  V4d best = V4d{} + start;
  V4i saw_nan{};
  size_t i = 0;
  for (; i + 4 <= c; i += 4) {
    V4d v = Load(x + i);
    saw_nan |= v != v;
    best = Select(v > best, v, best);
  }
  double a = best[0] > best[1] ? best[0] : best[1], b = best[2] > best[3] ? best[2] : best[3];
  double m = a > b ? a : b;
  bool seen = Any(saw_nan);
  for (; i < c; ++i) {
    seen = seen || x[i] != x[i];
    m = x[i] > m ? x[i] : m;
  }
  nan = nan || seen;
  return m;
}

/// What LaneSumOf adds up: x[i], |x[i]|, x[i]², or 1 for x[i] < limit (0 for nan).
enum class Lane { kValue, kAbs, kSquare, kBelow };

/// The sum of op(x[i]) over x[0..c) exactly as LaneSum (metric.h) adds it — lane k of four sums
/// the elements i ≡ k (mod 4) in order, the tail goes to lane 0, then (l0 + l1) + (l2 + l3) — so
/// the result is the same to the bit, four lanes an instruction.
template <Lane op>
PORTKIT_AVX2_FN inline double LaneSumOf(const double* x, size_t c, double limit = 0) {
  const V4d lim = V4d{} + limit, one = V4d{} + 1.0, zero{};
  V4d acc{};
  size_t i = 0;
  for (; i + 4 <= c; i += 4) {
    V4d v = Load(x + i);
    if constexpr (op == Lane::kAbs) v = Abs(v);
    else if constexpr (op == Lane::kSquare) v = v * v;
    else if constexpr (op == Lane::kBelow) v = Select(v < lim, one, zero);
    acc += v;
  }
  double a0 = acc[0];
  for (; i < c; ++i) {
    double v = x[i];
    if constexpr (op == Lane::kAbs) v = __builtin_fabs(v);
    else if constexpr (op == Lane::kSquare) v = v * v;
    else if constexpr (op == Lane::kBelow) v = v < limit ? 1.0 : 0.0;
    a0 += v;
  }
  return (a0 + acc[1]) + (acc[2] + acc[3]);
}

/// 2·atanh(s) = ln((1+s)/(1−s)) for |s| ≤ 0.1716 (z = s²): the series to s^23 by Estrin's scheme
/// (truncation < 1e−17).
PORTKIT_AVX2_FN inline V4d TwiceAtanh(V4d s, V4d z) {
  V4d z2 = z * z, z4 = z2 * z2, z8 = z4 * z4;
  V4d q0 = 1.0 / 3 + z * (1.0 / 5), q1 = 1.0 / 7 + z * (1.0 / 9), q2 = 1.0 / 11 + z * (1.0 / 13);
  V4d q3 = 1.0 / 15 + z * (1.0 / 17), q4 = 1.0 / 19 + z * (1.0 / 21);
  V4d r0 = q0 + z2 * q1, r1 = q2 + z2 * q3, r2 = q4 + z2 * (1.0 / 23);
  V4d p = (r0 + z4 * r1) + z8 * r2;
  return 2.0 * s + 2.0 * s * z * p;
}

/// ln x for four positive normal doubles: x = m·2^k with m in [√½, √2), ln m = 2·atanh(s),
/// s = (m−1)/(m+1), |s| ≤ 0.1716 (TwiceAtanh), and k·ln 2 in two parts; agrees with std::log to a
/// few ulp. Other inputs give meaningless lanes.
PORTKIT_AVX2_FN inline V4d Log4(V4d x) {
  V4i bits = reinterpret_cast<V4i>(x);
  V4i exp_field = (bits >> 52) & 0x7ff;
  V4i mant_bits = (bits & 0x000fffffffffffffLL) | 0x3ff0000000000000LL;
  V4d m = reinterpret_cast<V4d>(mant_bits);
  V4i big = m > 1.4142135623730951;  // all ones where m > √2
  m = reinterpret_cast<V4d>((reinterpret_cast<V4i>(m * 0.5) & big) | (reinterpret_cast<V4i>(m) & ~big));
  // k as a double without a 64-bit int → double conversion (not in AVX2): 2^52 + field − 2^52.
  V4d k = reinterpret_cast<V4d>(exp_field | 0x4330000000000000LL) - 4503599627370496.0;
  k = k - 1023.0 + reinterpret_cast<V4d>(big & reinterpret_cast<V4i>(V4d{} + 1.0));
  V4d f = m - 1.0;
  V4d s = f / (f + 2.0);
  V4d log_m = TwiceAtanh(s, s * s);
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  return k * kLn2Hi + (k * kLn2Lo + log_m);
}

/// ln(a/c) for four pairs of positive doubles, lane by lane. Where √½ ≤ a/c ≤ √2 (close values,
/// the usual case) it is 2·atanh(s) with s = (a−c)/(a+c): a−c is exact there (Sterbenz), so s is
/// within about one ulp and so is the logarithm, with one division and no rounding of the ratio
/// itself (ln(fl(a/c)) is off by up to 1.1e−16 absolute, a relative error of 1e−13 when
/// a/c ≈ 1 ± 1e−3). Other lanes take Log4(a/c). Returns false when a lane's a/c is not a positive
/// normal double (inf, nan, an fp64 extreme): `out` is then meaningless.
PORTKIT_AVX2_FN inline bool LogRatio4(V4d a, V4d c, V4d& out) {
  constexpr double kMinNormal = 2.2250738585072014e-308, kMaxFinite = 1.7976931348623157e308;
  constexpr double kLimit = 0.029437251522859383;  // ((√2−1)/(√2+1))²: a/c in [√½, √2]
  V4d s = (a - c) / (a + c);
  V4d z = s * s;
  out = TwiceAtanh(s, z);
  // One compare and a movemask (Any() of a vector mask costs four extracts and three ors).
  if (_mm256_movemask_pd(_mm256_cmp_pd(reinterpret_cast<__m256d>(z), _mm256_set1_pd(kLimit), _CMP_NLE_UQ)) == 0)
    return true;
  V4i far = ~(z <= kLimit);  // nan (inf or nan inputs) included
  V4d r = a / c;
  V4i odd = (r < kMinNormal) | (r > kMaxFinite) | (r != r);
  out = Select(far, Log4(r), out);
  return !Any(odd & far);
}

}  // namespace portkit::accuracy::simd
#endif
