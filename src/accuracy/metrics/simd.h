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
PORTKIT_AVX2_FN inline V4d Abs(V4d v) {
  return reinterpret_cast<V4d>(reinterpret_cast<V4i>(v) & 0x7fffffffffffffffLL);
}
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

}  // namespace portkit::accuracy::simd
#endif
