// Metric: MaxULPErr = max |N − B| / ulp_T(B): the error in units in the last place of B in the
// target's floating type T (fp32: 2^(e−23), floor 2^−149; fp16: 2^(e−10), floor 2^−24; bf16:
// 2^(e−7), floor 2^−133; fp64 and non-float types: fp32's). Thresholds (the thresholds of Ascend's accuracy tools,
// docs/accuracy.md): 1 for fp16/bf16, 32 for fp32. A nan element → nan.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "accuracy/metrics/metric.h"
#include "accuracy/metrics/simd.h"

namespace portkit::accuracy {
namespace {

/// 2^k for k in the normal range of double.
inline double Pow2(int64_t k) {
  uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

/// |N − B| in ulps of b: the leading bit of |b| is at 2^(exp_field − 1023); zero, double-subnormal
/// and non-finite b take the type's smallest ulp. nan when the error is nan.
inline __attribute__((always_inline)) double UlpsOf(double err, double b, int64_t mant, int64_t floor_exp) {
  uint64_t bits;
  std::memcpy(&bits, &b, sizeof bits);
  auto exp_field = static_cast<int64_t>((bits >> 52) & 0x7ff);
  int64_t e = (exp_field == 0 || exp_field == 0x7ff) ? floor_exp + mant : exp_field - 1023;
  int64_t ulp_exp = std::max<int64_t>(e - mant, floor_exp);
  return err * Pow2(-ulp_exp);
}

#ifdef PORTKIT_ACCURACY_AVX2
/// The largest of `start` and the elements' ulp errors, four at a time; `nan` is set on a nan.
PORTKIT_AVX2_FN double MaxUlpsAvx2(const Chunk& c, int64_t mant, int64_t floor_exp, double start, bool& nan) {
  using namespace simd;
  V4d best = V4d{} + start;
  V4i saw_nan{};
  const V4i special = V4i{} + (floor_exp + mant);
  size_t i = 0;
  for (; i + 4 <= c.count; i += 4) {
    V4i exp_field = (reinterpret_cast<V4i>(Load(c.b + i)) >> 52) & 0x7ff;
    V4i odd = (exp_field == 0) | (exp_field == 0x7ff);
    V4i e = (special & odd) | ((exp_field - 1023) & ~odd);
    V4i ulp_exp = e - mant;
    V4i low = ulp_exp < floor_exp;
    ulp_exp = ((V4i{} + floor_exp) & low) | (ulp_exp & ~low);
    V4d u = Load(c.abs_err + i) * reinterpret_cast<V4d>((1023 - ulp_exp) << 52);  // × 2^−ulp_exp
    saw_nan |= u != u;
    best = Select(u > best, u, best);
  }
  double m = std::max(std::max(best[0], best[1]), std::max(best[2], best[3]));
  nan = nan || Any(saw_nan);
  for (; i < c.count; ++i) {
    double u = UlpsOf(c.abs_err[i], c.b[i], mant, floor_exp);
    nan = nan || u != u;
    m = u > m ? u : m;
  }
  return m;
}
#endif

class MaxUlpError : public Metric {
 public:
  MaxUlpError(DType t, bool vector) : avx2_(vector) {
    if (t == DType::kF16) mant_ = 10, floor_exp_ = -24;
    else if (t == DType::kBF16) mant_ = 7, floor_exp_ = -133;
    else if (t == DType::kF8E4M3) mant_ = 3, floor_exp_ = -9;
    else if (t == DType::kF8E5M2) mant_ = 2, floor_exp_ = -16;
  }
  std::string_view name() const override { return "MaxULPErr"; }
  void Accumulate(const Chunk& c) override {
    bool nan = false;
#ifdef PORTKIT_ACCURACY_AVX2
    if (avx2_) {
      max_ = MaxUlpsAvx2(c, mant_, floor_exp_, max_, nan);
      nan_ = nan_ || nan;
      return;
    }
#endif
    max_ = LaneMaxOf(c.count, max_, nan, [&](size_t i) { return UlpsOf(c.abs_err[i], c.b[i], mant_, floor_exp_); });
    nan_ = nan_ || nan;
  }
  void AccumulateFused(const FusedSums& s) override { max_ = s.max_ulp > max_ ? s.max_ulp : max_; }
  void Merge(const Metric& other) override {
    const auto& o = static_cast<const MaxUlpError&>(other);
    max_ = std::max(max_, o.max_), nan_ = nan_ || o.nan_;
  }
  double Finalize() const override { return nan_ ? NAN : max_; }

 private:
  int64_t mant_ = 23, floor_exp_ = -149;
  double max_ = 0;
  bool nan_ = false;
  bool avx2_;
};

}  // namespace

std::unique_ptr<Metric> MakeMaxUlpError(DType target, bool vector) {
  return std::make_unique<MaxUlpError>(target, vector);
}

}  // namespace portkit::accuracy
