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

}  // namespace portkit::accuracy::simd
#endif
