// Metric: KL(P || Q) where P = |B| / Σ|B| and Q = |N| / Σ|N| (magnitudes as distributions), in one
// pass: KL = (Σ|b|·ln(|b|+ε) − Σ|b|·ln(|n|+ε)) / S_B − ln S_B + ln S_N with ε = 1e-10 guarding
// zeros. Both all-zero → 0; a nan or inf element → nan.
#include <cmath>

#include "accuracy/metrics/metric.h"

namespace portkit::accuracy {
namespace {

constexpr double kEps = 1e-10;

class KlDivergence : public Metric {
 public:
  std::string_view name() const override { return "KLDivergence"; }
  void Accumulate(const Chunk& c) override {
    sn_ += LaneSum(c.count, [&](size_t i) { return std::fabs(c.n[i]); });
    sb_ += LaneSum(c.count, [&](size_t i) { return std::fabs(c.b[i]); });
    plogq_ += LaneSum(c.count, [&](size_t i) {
      double ab = std::fabs(c.b[i]);
      return ab * std::log((ab + kEps) / (std::fabs(c.n[i]) + kEps));  // one log, not two
    });
  }
  void Merge(const Metric& other) override {
    const auto& o = static_cast<const KlDivergence&>(other);
    sn_ += o.sn_, sb_ += o.sb_, plogq_ += o.plogq_;
  }
  double Finalize() const override {
    if (std::isnan(sn_) || std::isnan(sb_) || std::isinf(sn_) || std::isinf(sb_)) return NAN;
    if (sb_ == 0 && sn_ == 0) return 0.0;
    if (sb_ == 0 || sn_ == 0) return INFINITY;
    double kl = plogq_ / sb_ - std::log(sb_) + std::log(sn_);
    return kl < 0 ? 0.0 : kl;  // rounding can give -1e-17
  }

 private:
  double sn_ = 0, sb_ = 0;
  double plogq_ = 0;  ///< Σ|b|·(ln(|b|+ε) − ln(|n|+ε))
};

}  // namespace

std::unique_ptr<Metric> MakeKlDivergence() { return std::make_unique<KlDivergence>(); }

}  // namespace portkit::accuracy
