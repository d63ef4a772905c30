// Metric: Cosine = N·B / (‖N‖‖B‖). Both all-zero → 1 (identical); one all-zero → 0.
// A nan/inf element makes it nan.
#include <algorithm>
#include <cmath>

#include "accuracy/metrics/metric.h"
#include "accuracy/metrics/simd.h"

namespace portkit::accuracy {
namespace {

#ifdef PORTKIT_ACCURACY_AVX2
/// N·B, N·N and B·B of a chunk in one pass, four lanes each.
PORTKIT_AVX2_FN void DotsAvx2(const Chunk& c, double& dot, double& nn, double& bb) {
  using namespace simd;
  V4d d{}, x{}, y{};
  size_t i = 0;
  for (; i + 4 <= c.count; i += 4) {
    V4d n = Load(c.n + i), b = Load(c.b + i);
    d += n * b, x += n * n, y += b * b;
  }
  double sd = Sum(d), sx = Sum(x), sy = Sum(y);
  for (; i < c.count; ++i) sd += c.n[i] * c.b[i], sx += c.n[i] * c.n[i], sy += c.b[i] * c.b[i];
  dot += sd, nn += sx, bb += sy;
}
#endif

class Cosine : public Metric {
 public:
  explicit Cosine(bool vector) : avx2_(vector) {}
  std::string_view name() const override { return "Cosine"; }
  void Accumulate(const Chunk& c) override {
#ifdef PORTKIT_ACCURACY_AVX2
    if (avx2_) {
      DotsAvx2(c, dot_, nn_, bb_);
      return;
    }
#endif
    dot_ += LaneSum(c.count, [&](size_t i) { return c.n[i] * c.b[i]; });
    nn_ += LaneSum(c.count, [&](size_t i) { return c.n[i] * c.n[i]; });
    bb_ += LaneSum(c.count, [&](size_t i) { return c.b[i] * c.b[i]; });
  }
  void AccumulateFused(const FusedSums& s) override { dot_ += s.dot, nn_ += s.n_sq, bb_ += s.b_sq; }
  void Merge(const Metric& other) override {
    const auto& o = static_cast<const Cosine&>(other);
    dot_ += o.dot_, nn_ += o.nn_, bb_ += o.bb_;
  }
  double Finalize() const override {
    if (std::isnan(dot_) || std::isnan(nn_) || std::isnan(bb_) || std::isinf(nn_) || std::isinf(bb_)) return NAN;
    if (nn_ == 0 && bb_ == 0) return 1.0;
    if (nn_ == 0 || bb_ == 0) return 0.0;
    // One square root of the product where it is a normal number: identical data then give
    // exactly 1 (sqrt(x²) == x), which the product of two roots does not guarantee.
    double prod = nn_ * bb_;
    double c = std::isnormal(prod) ? dot_ / std::sqrt(prod) : dot_ / (std::sqrt(nn_) * std::sqrt(bb_));
    return std::clamp(c, -1.0, 1.0);
  }

 private:
  double dot_ = 0, nn_ = 0, bb_ = 0;
  bool avx2_;
};

}  // namespace

std::unique_ptr<Metric> MakeCosine(bool vector) { return std::make_unique<Cosine>(vector); }

}  // namespace portkit::accuracy
