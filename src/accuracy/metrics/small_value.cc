// Metric: SmallValueErrRatio — among the elements whose reference is small (|B| < the target
// type's small-value threshold: fp32 2^-20, fp16/bf16 2^-10), the share whose
// absolute error exceeds the type's small-value tolerance (fp32 2^-30, fp16/bf16 2^-16). Relative
// error means nothing near zero, so these elements are judged by absolute error instead.
// No small elements → 0; a nan element counts as exceeding.
#include <cmath>

#include "accuracy/metrics/metric.h"
#include "accuracy/metrics/simd.h"

namespace portkit::accuracy {
namespace {

#ifdef PORTKIT_ACCURACY_AVX2
/// Adds to `small` the elements with |b| < sv and to `bad` those of them with !(|N−B| <= atol).
PORTKIT_AVX2_FN void CountSmallAvx2(const Chunk& c, double sv, double atol, double& small, double& bad) {
  using namespace simd;
  V4d s{}, x{};
  const V4d one = V4d{} + 1.0;
  size_t i = 0;
  for (; i + 4 <= c.count; i += 4) {
    V4i is_small = Abs(Load(c.b + i)) < sv;
    V4i within = Load(c.abs_err + i) <= atol;
    s += reinterpret_cast<V4d>(reinterpret_cast<V4i>(one) & is_small);
    x += reinterpret_cast<V4d>(reinterpret_cast<V4i>(one) & is_small & ~within);
  }
  double ns = Sum(s), nb = Sum(x);
  for (; i < c.count; ++i) {
    bool sm = std::fabs(c.b[i]) < sv;
    ns += sm, nb += sm && !(c.abs_err[i] <= atol);
  }
  small += ns, bad += nb;
}
#endif

class SmallValueErrRatio : public Metric {
 public:
  SmallValueErrRatio(DType t, bool vector) : tolerance_(ToleranceFor(t)), avx2_(vector) {}
  std::string_view name() const override { return "SmallValueErrRatio"; }
  void Accumulate(const Chunk& c) override {
    double sv = tolerance_.small_value, atol = tolerance_.small_value_atol;
#ifdef PORTKIT_ACCURACY_AVX2
    if (avx2_) {
      CountSmallAvx2(c, sv, atol, small_, bad_);
      return;
    }
#endif
    small_ += LaneSum(c.count, [&](size_t i) { return std::fabs(c.b[i]) < sv ? 1.0 : 0.0; });
    // nan fails `<= atol`, so a nan small element counts as exceeding.
    bad_ += LaneSum(c.count, [&](size_t i) { return std::fabs(c.b[i]) < sv && !(c.abs_err[i] <= atol) ? 1.0 : 0.0; });
  }
  void AccumulateFused(const FusedSums& s) override { small_ += s.small, bad_ += s.small_bad; }
  void Merge(const Metric& other) override {
    const auto& o = static_cast<const SmallValueErrRatio&>(other);
    small_ += o.small_, bad_ += o.bad_;
  }
  double Finalize() const override { return small_ > 0 ? bad_ / small_ : 0.0; }

 private:
  Tolerance tolerance_;
  bool avx2_;
  double small_ = 0, bad_ = 0;  // counts, exact in doubles below 2^53
};

}  // namespace

std::unique_ptr<Metric> MakeSmallValueErrRatio(DType target, bool vector) {
  return std::make_unique<SmallValueErrRatio>(target, vector);
}

Tolerance ToleranceFor(DType t) {
  switch (t) {
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E4M3:
    case DType::kF8E5M2: return {std::ldexp(1.0, -10), std::ldexp(1.0, -16), 1.0};
    default: return {std::ldexp(1.0, -20), std::ldexp(1.0, -30), 32.0};
  }
}

}  // namespace portkit::accuracy
