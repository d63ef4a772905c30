// Metric: KL(P || Q) where P = |B| / Σ|B| and Q = |N| / Σ|N| (magnitudes as distributions), in one
// pass: KL = (Σ|b|·ln(|b|+ε) − Σ|b|·ln(|n|+ε)) / S_B − ln S_B + ln S_N with ε = 1e-10 guarding
// zeros. Both all-zero → 0; a nan element → nan.
#include <cmath>

#include "accuracy/metrics/metric.h"

namespace portkit::accuracy {
namespace {

constexpr double kEps = 1e-10;

class KlDivergence : public Metric {
 public:
  std::string_view name() const override { return "KLDivergence"; }
  void Accumulate(const double* n, const double* b, size_t count) override {
    for (size_t i = 0; i < count; ++i) {
      double an = std::fabs(n[i]), ab = std::fabs(b[i]);
      sn_ += an;
      sb_ += ab;
      plogp_ += ab * std::log(ab + kEps);
      plogq_ += ab * std::log(an + kEps);
    }
  }
  double Finalize() const override {
    if (std::isnan(sn_) || std::isnan(sb_) || std::isinf(sn_) || std::isinf(sb_)) return NAN;
    if (sb_ == 0 && sn_ == 0) return 0.0;
    if (sb_ == 0 || sn_ == 0) return INFINITY;
    double kl = (plogp_ - plogq_) / sb_ - std::log(sb_) + std::log(sn_);
    return kl < 0 ? 0.0 : kl;  // rounding can give -1e-17
  }

 private:
  double sn_ = 0, sb_ = 0, plogp_ = 0, plogq_ = 0;
};

}  // namespace

std::unique_ptr<Metric> MakeKlDivergence() { return std::make_unique<KlDivergence>(); }

}  // namespace portkit::accuracy
