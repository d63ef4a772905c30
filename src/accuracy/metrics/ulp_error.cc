// Metric: MaxULPErr = max |N − B| / ulp_T(B): the error in units in the last place of B in the
// target's floating type T (fp32: 2^(e−23), floor 2^−149; fp16: 2^(e−10), floor 2^−24; bf16:
// 2^(e−7), floor 2^−133; fp64 and non-float types: fp32's). Thresholds (FORMATS.md §2): 1 for
// fp16/bf16, 32 for fp32. A nan element → nan.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "accuracy/metrics/metric.h"

namespace portkit::accuracy {
namespace {

/// 2^k for k in the normal range of double.
inline double Pow2(int64_t k) {
  uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

class MaxUlpError : public Metric {
 public:
  explicit MaxUlpError(DType t) {
    if (t == DType::kF16) mant_ = 10, floor_exp_ = -24;
    else if (t == DType::kBF16) mant_ = 7, floor_exp_ = -133;
    else if (t == DType::kF8E4M3) mant_ = 3, floor_exp_ = -9;
    else if (t == DType::kF8E5M2) mant_ = 2, floor_exp_ = -16;
  }
  std::string_view name() const override { return "MaxULPErr"; }
  void Accumulate(const Chunk& c) override {
    bool nan = false;
    max_ = LaneMaxOf(c.count, max_, nan, [&](size_t i) {
      uint64_t bits;
      std::memcpy(&bits, &c.b[i], sizeof bits);
      auto exp_field = static_cast<int64_t>((bits >> 52) & 0x7ff);
      // Leading bit of |b| at 2^(exp_field − 1023); zero, double-subnormal and non-finite b take
      // the type's smallest ulp.
      int64_t e = (exp_field == 0 || exp_field == 0x7ff) ? floor_exp_ + mant_ : exp_field - 1023;
      int64_t ulp_exp = std::max<int64_t>(e - mant_, floor_exp_);
      return c.abs_err[i] * Pow2(-ulp_exp);  // nan when the error is nan
    });
    nan_ = nan_ || nan;
  }
  void Merge(const Metric& other) override {
    const auto& o = static_cast<const MaxUlpError&>(other);
    max_ = std::max(max_, o.max_), nan_ = nan_ || o.nan_;
  }
  double Finalize() const override { return nan_ ? NAN : max_; }

 private:
  int64_t mant_ = 23, floor_exp_ = -149;
  double max_ = 0;
  bool nan_ = false;
};

}  // namespace

std::unique_ptr<Metric> MakeMaxUlpError(DType target) { return std::make_unique<MaxUlpError>(target); }

}  // namespace portkit::accuracy
