// Metric: MaxULPErr = max |N − B| / ulp_T(B): the error in units in the last place of B in the
// target's floating type T (fp32: 2^(e−23), floor 2^−149; fp16: 2^(e−10), floor 2^−24; bf16:
// 2^(e−7), floor 2^−133; fp64 and non-float types: fp32's). Thresholds (FORMATS.md §2): 1 for
// fp16/bf16, 32 for fp32. A nan element → nan.
#include <cmath>

#include "accuracy/metrics/metric.h"

namespace portkit::accuracy {
namespace {

class MaxUlpError : public Metric {
 public:
  explicit MaxUlpError(DType t) {
    if (t == DType::kF16) mant_ = 10, floor_exp_ = -24;
    else if (t == DType::kBF16) mant_ = 7, floor_exp_ = -133;
    else if (t == DType::kF8E4M3) mant_ = 3, floor_exp_ = -9;
    else if (t == DType::kF8E5M2) mant_ = 2, floor_exp_ = -16;
  }
  std::string_view name() const override { return "MaxULPErr"; }
  void Accumulate(const double* n, const double* b, size_t count) override {
    for (size_t i = 0; i < count; ++i) {
      if (std::isnan(n[i]) || std::isnan(b[i])) {
        nan_ = true;
        continue;
      }
      double d = std::fabs(n[i] - b[i]);
      if (d == 0) continue;
      int e = 0;
      if (b[i] != 0 && std::isfinite(b[i])) {
        std::frexp(b[i], &e);  // b = m·2^e with m in [0.5, 1): leading bit at 2^(e−1)
        e -= 1;
      } else {
        e = floor_exp_ + mant_;
      }
      double ulp = std::ldexp(1.0, std::max(e - mant_, floor_exp_));
      double u = d / ulp;
      if (u > max_) max_ = u;
    }
  }
  double Finalize() const override { return nan_ ? NAN : max_; }

 private:
  int mant_ = 23, floor_exp_ = -149;
  double max_ = 0;
  bool nan_ = false;
};

}  // namespace

std::unique_ptr<Metric> MakeMaxUlpError(DType target) { return std::make_unique<MaxUlpError>(target); }

}  // namespace portkit::accuracy
