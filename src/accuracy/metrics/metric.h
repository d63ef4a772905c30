#pragma once
/// Comparison metrics (the thresholds of Ascend's accuracy tools, docs/accuracy.md): each accumulates over chunks of
/// elements (target N, reference B, decoded to double) and finalises once, so a tensor of any size streams through in
/// constant memory. One file per metric; MakeMetrics lists them in column order. MetricSet runs them all: it computes
/// the element errors of a chunk once and hands every metric the same Chunk, so each metric's loop is a plain,
/// branch-free reduction.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "accuracy/dtype.h"

namespace portkit::accuracy {

/// Relative error guard: RE = |N - B| / max(|B|, kRelGuard).
constexpr double kRelGuard = 1e-10;

/// A run of aligned elements with their errors computed once.
struct Chunk {
  const double* n;        ///< target values
  const double* b;        ///< reference values
  const double* abs_err;  ///< |N − B|; 0 where N == B (also the same infinity); nan if either is nan
  const double* rel_err;  ///< abs_err / max(|B|, kRelGuard)
  size_t count;
};

/// What one fused pass over a chunk of fp32 pairs yields (FusedChunkF32): every metric's sums and
/// extremes of the chunk, each formed exactly as the metric's own AVX2 loop forms it over the
/// decoded chunk (same lanes, same order, same rounding), so adding them gives the same bits.
struct FusedSums {
  // Statistics of each side as compare's TensorStats adds them: n_max .. b_min hold the running
  // values on entry and the updated ones on return; the sums are the chunk's.
  double n_max, n_min, b_max, b_min;
  double n_sum = 0, n_sq = 0, b_sum = 0, b_sq = 0;
  double dot = 0;                         ///< Σ N·B (N·N and B·B are n_sq and b_sq)
  double err_sq = 0;                      ///< Σ |N−B|²
  double max_abs = 0, sum_abs = 0;        ///< of |N−B|
  double max_rel = 0, sum_rel = 0;        ///< of RE
  double within_1e3 = 0, within_5e3 = 0;  ///< elements with RE below 0.001 / 0.005
  double abs_n = 0, abs_b = 0;            ///< Σ|N|, Σ|B|
  double b_log_ratio = 0;                 ///< Σ|b|·ln((|b|+ε)/(|n|+ε)) (kl_divergence.cc)
  double max_ulp = 0;                     ///< largest |N−B| in fp32 ulps of B
  double small = 0, small_bad = 0;        ///< small_value.cc's counts for an fp32 target
};

class Metric {
 public:
  virtual ~Metric() = default;
  /// The result column ("Cosine", "MaxAbsErr", ...).
  virtual std::string_view name() const = 0;
  virtual void Accumulate(const Chunk& chunk) = 0;
  /// Adds a chunk's fused sums: the same state change as Accumulate of that chunk would make.
  virtual void AccumulateFused(const FusedSums& sums) = 0;
  /// Adds the state of `other`, a metric of the same kind that accumulated a later part of the
  /// same tensor (so a tensor can be split across threads and merged in order).
  virtual void Merge(const Metric& other) = 0;
  virtual double Finalize() const = 0;
};

/// Sum of f(i) for i in [0, count) over four independent lanes (no loop-carried latency chain;
/// the order is fixed, so results are deterministic).
template <typename F>
inline double LaneSum(size_t count, F f) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  size_t i = 0;
  for (; i + 4 <= count; i += 4) a0 += f(i), a1 += f(i + 1), a2 += f(i + 2), a3 += f(i + 3);
  for (; i < count; ++i) a0 += f(i);
  return (a0 + a1) + (a2 + a3);
}

/// Largest of `start` and f(i) for i in [0, count), ignoring nan, over four lanes; `saw_nan` is
/// set when a nan is seen.
template <typename F>
inline double LaneMaxOf(size_t count, double start, bool& saw_nan, F f) {
  double m0 = start, m1 = start, m2 = start, m3 = start;
  bool nan = false;
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    double v0 = f(i), v1 = f(i + 1), v2 = f(i + 2), v3 = f(i + 3);
    nan |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3);
    m0 = v0 > m0 ? v0 : m0, m1 = v1 > m1 ? v1 : m1, m2 = v2 > m2 ? v2 : m2, m3 = v3 > m3 ? v3 : m3;
  }
  for (; i < count; ++i) {
    double v = f(i);
    nan |= v != v;
    m0 = v > m0 ? v : m0;
  }
  saw_nan = saw_nan || nan;
  double a = m0 > m1 ? m0 : m1, b = m2 > m3 ? m2 : m3;
  return a > b ? a : b;
}

/// LaneMaxOf over an array.
inline double LaneMax(const double* x, size_t count, double start, bool& saw_nan) {
  return LaneMaxOf(count, start, saw_nan, [x](size_t i) { return x[i]; });
}

/// Per-dtype tolerances of the target type (the thresholds of Ascend's accuracy tools, docs/accuracy.md): elements with
/// |B| < small_value are judged by absolute error against small_value_atol; ulp is the MaxULPErr threshold.
struct Tolerance {
  double small_value, small_value_atol, ulp;
};
Tolerance ToleranceFor(DType target);

/// `vector`: use the AVX2 loops (only pass true when VectorLoopsAvailable()).
std::unique_ptr<Metric> MakeCosine(bool vector);
std::unique_ptr<Metric> MakeEuclideanDistance();
std::unique_ptr<Metric> MakeMaxAbsErr(bool vector);
std::unique_ptr<Metric> MakeMaxRelativeErr(bool vector);
/// Share of elements with RE below `limit` (0.001: One Thousandth, 0.005: Five Thousandths).
std::unique_ptr<Metric> MakeErrRatio(double limit, std::string_view column);
std::unique_ptr<Metric> MakeRmse();
std::unique_ptr<Metric> MakeMeanAbsErr();
std::unique_ptr<Metric> MakeMeanRelErr();
/// KL(B || N) over the element magnitudes normalised to distributions.
std::unique_ptr<Metric> MakeKlDivergence(bool vector);
/// Largest |N - B| in units in the last place of B in the target's floating type.
std::unique_ptr<Metric> MakeMaxUlpError(DType target, bool vector);
/// Share of small reference elements whose absolute error exceeds the type's tolerance.
std::unique_ptr<Metric> MakeSmallValueErrRatio(DType target, bool vector);

/// True when this build and CPU have the AVX2 loops (x86-64 with AVX2 and FMA).
bool VectorLoopsAvailable();

/// Every metric, in the result file's column order; `vector` as for the Make functions.
std::vector<std::unique_ptr<Metric>> MakeMetrics(DType target, bool vector);

/// All metrics of one tensor pair (or of one part of it), fed in pieces of any size.
class MetricSet {
 public:
  /// `vector`: use the AVX2 loops where the CPU has them (false: the scalar loops everywhere).
  explicit MetricSet(DType target, bool vector = true);
  void Accumulate(const double* n, const double* b, size_t count);
  /// Accumulates one chunk of fp32 elements (an fp32 target against an fp32 reference) in one
  /// fused pass, never widening it into memory; `stats` brings the running max/min of each side
  /// and returns them updated, with the chunk's other statistics (FusedSums). The same results,
  /// to the bit, as decoding to double and calling Accumulate. Returns false, having changed
  /// nothing, when the fused pass does not apply: a set not made with the vector loops for an
  /// fp32 target, `count` other than kChunk, or a value in the chunk that is inf or nan.
  bool AccumulateF32(const uint8_t* n, const uint8_t* b, size_t count, FusedSums& stats);
  /// Adds a set that accumulated a later part of the same tensor.
  void Merge(const MetricSet& later);
  /// Frees the per-chunk error arrays (16 KiB) once accumulating is over: a compare keeps one set
  /// per tensor pair until the merge, so 100k pairs would otherwise hold 1.6 GB of scratch
  /// (docs/safety.md, Limits). Accumulate allocates them again if it is called later.
  void ReleaseScratch();
  /// Column name → value.
  std::map<std::string, double> Results() const;

  static constexpr size_t kChunk = 1024;  ///< elements per Chunk (its error arrays stay in L1)

 private:
  std::vector<std::unique_ptr<Metric>> metrics_;
  std::vector<double> abs_err_, rel_err_;
  bool avx2_ = false;   ///< the element errors run four at a time
  bool fused_ = false;  ///< AccumulateF32 applies (AVX2, fp32 target)
};

/// One fused pass over `count` (a multiple of 8) fp32 pairs (little-endian bytes, any alignment), for an fp32 target:
/// fills `sums`. Returns false when a value is not finite (the sums are then meaningless). Only with AVX2.
bool FusedChunkF32(const uint8_t* n, const uint8_t* b, size_t count, FusedSums& sums);

}  // namespace portkit::accuracy
