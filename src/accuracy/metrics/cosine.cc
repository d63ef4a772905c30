// Metric: Cosine = N·B / (‖N‖‖B‖). Both all-zero → 1 (identical); one all-zero → 0.
// A nan/inf element makes it nan.
#include <cmath>

#include "accuracy/metrics/metric.h"

namespace portkit::accuracy {
namespace {

class Cosine : public Metric {
 public:
  std::string_view name() const override { return "Cosine"; }
  void Accumulate(const Chunk& c) override {
    dot_ += LaneSum(c.count, [&](size_t i) { return c.n[i] * c.b[i]; });
    nn_ += LaneSum(c.count, [&](size_t i) { return c.n[i] * c.n[i]; });
    bb_ += LaneSum(c.count, [&](size_t i) { return c.b[i] * c.b[i]; });
  }
  void Merge(const Metric& other) override {
    const auto& o = static_cast<const Cosine&>(other);
    dot_ += o.dot_, nn_ += o.nn_, bb_ += o.bb_;
  }
  double Finalize() const override {
    if (std::isnan(dot_) || std::isnan(nn_) || std::isnan(bb_) || std::isinf(nn_) || std::isinf(bb_)) return NAN;
    if (nn_ == 0 && bb_ == 0) return 1.0;
    if (nn_ == 0 || bb_ == 0) return 0.0;
    return dot_ / (std::sqrt(nn_) * std::sqrt(bb_));
  }

 private:
  double dot_ = 0, nn_ = 0, bb_ = 0;
};

}  // namespace

std::unique_ptr<Metric> MakeCosine() { return std::make_unique<Cosine>(); }

}  // namespace portkit::accuracy
