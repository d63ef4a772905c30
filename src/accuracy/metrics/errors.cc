// Metrics on the element errors: EucDist = ‖N−B‖₂, MaxAbsErr = max|N−B|, MaxRelativeErr = max RE,
// RMSE, mean absolute and mean relative error, and the shares of elements with RE below 0.001 /
// 0.005 (RE = |N−B| / max(|B|, 1e-10)). A nan element makes them nan (the shares count it as not
// within); an inf one (on one side) makes them inf.
#include <algorithm>
#include <cassert>
#include <cmath>

#include "accuracy/metrics/metric.h"
#include "accuracy/metrics/simd.h"

namespace portkit::accuracy {
namespace {

class SumSquares : public Metric {
 public:
  SumSquares(bool root_mean, std::string_view column) : root_mean_(root_mean), column_(column) {}
  std::string_view name() const override { return column_; }
  void Accumulate(const Chunk& c) override {
#ifdef PORTKIT_ACCURACY_AVX2
    if (simd::CpuHasAvx2()) {
      sum_ += simd::LaneSumOf<simd::Lane::kSquare>(c.abs_err, c.count);
      count_ += c.count;
      return;
    }
#endif
    sum_ += LaneSum(c.count, [&](size_t i) { return c.abs_err[i] * c.abs_err[i]; });
    count_ += c.count;
  }
  void AccumulateFused(const FusedSums& s) override { sum_ += s.err_sq, count_ += MetricSet::kChunk; }
  void Merge(const Metric& other) override {
    const auto& o = static_cast<const SumSquares&>(other);
    sum_ += o.sum_, count_ += o.count_;
  }
  double Finalize() const override {
    if (root_mean_) return count_ ? std::sqrt(sum_ / static_cast<double>(count_)) : 0.0;
    return std::sqrt(sum_);
  }

 private:
  bool root_mean_;
  std::string_view column_;
  double sum_ = 0;
  size_t count_ = 0;
};

class MaxOf : public Metric {
 public:
  MaxOf(bool relative, std::string_view column, bool vector) : relative_(relative), column_(column), avx2_(vector) {}
  std::string_view name() const override { return column_; }
  void Accumulate(const Chunk& c) override {
    const double* e = relative_ ? c.rel_err : c.abs_err;
#ifdef PORTKIT_ACCURACY_AVX2
    if (avx2_) {
      max_ = simd::MaxOf(e, c.count, max_, nan_);
      return;
    }
#endif
    max_ = LaneMax(e, c.count, max_, nan_);
  }
  void AccumulateFused(const FusedSums& s) override {
    double m = relative_ ? s.max_rel : s.max_abs;
    max_ = m > max_ ? m : max_;
  }
  void Merge(const Metric& other) override {
    const auto& o = static_cast<const MaxOf&>(other);
    max_ = std::max(max_, o.max_), nan_ = nan_ || o.nan_;
  }
  double Finalize() const override { return nan_ ? NAN : max_; }

 private:
  bool relative_;
  std::string_view column_;
  bool avx2_;
  double max_ = 0;
  bool nan_ = false;
};

class MeanOf : public Metric {
 public:
  MeanOf(bool relative, std::string_view column) : relative_(relative), column_(column) {}
  std::string_view name() const override { return column_; }
  void Accumulate(const Chunk& c) override {
    const double* e = relative_ ? c.rel_err : c.abs_err;
#ifdef PORTKIT_ACCURACY_AVX2
    if (simd::CpuHasAvx2()) {
      sum_ += simd::LaneSumOf<simd::Lane::kValue>(e, c.count);
      count_ += c.count;
      return;
    }
#endif
    sum_ += LaneSum(c.count, [&](size_t i) { return e[i]; });
    count_ += c.count;
  }
  void AccumulateFused(const FusedSums& s) override {
    sum_ += relative_ ? s.sum_rel : s.sum_abs;
    count_ += MetricSet::kChunk;
  }
  void Merge(const Metric& other) override {
    const auto& o = static_cast<const MeanOf&>(other);
    sum_ += o.sum_, count_ += o.count_;
  }
  double Finalize() const override { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }

 private:
  bool relative_;
  std::string_view column_;
  double sum_ = 0;
  size_t count_ = 0;
};

class ErrRatio : public Metric {
 public:
  ErrRatio(double limit, std::string_view column) : limit_(limit), column_(column) {}
  std::string_view name() const override { return column_; }
  void Accumulate(const Chunk& c) override {
    // Counted in doubles (exact below 2^53); nan compares false, so it is not within.
#ifdef PORTKIT_ACCURACY_AVX2
    if (simd::CpuHasAvx2()) {
      within_ += simd::LaneSumOf<simd::Lane::kBelow>(c.rel_err, c.count, limit_);
      count_ += c.count;
      return;
    }
#endif
    within_ += LaneSum(c.count, [&](size_t i) { return c.rel_err[i] < limit_ ? 1.0 : 0.0; });
    count_ += c.count;
  }
  void AccumulateFused(const FusedSums& s) override {
    assert(limit_ == 0.001 || limit_ == 0.005);  // the fused pass counts MakeMetrics' two limits
    within_ += limit_ == 0.001 ? s.within_1e3 : s.within_5e3;
    count_ += MetricSet::kChunk;
  }
  void Merge(const Metric& other) override {
    const auto& o = static_cast<const ErrRatio&>(other);
    within_ += o.within_, count_ += o.count_;
  }
  double Finalize() const override { return count_ ? within_ / static_cast<double>(count_) : 1.0; }

 private:
  double limit_;
  std::string_view column_;
  double within_ = 0;
  size_t count_ = 0;
};

}  // namespace

std::unique_ptr<Metric> MakeEuclideanDistance() { return std::make_unique<SumSquares>(false, "EucDist"); }
std::unique_ptr<Metric> MakeRmse() { return std::make_unique<SumSquares>(true, "RMSE"); }
std::unique_ptr<Metric> MakeMaxAbsErr(bool vector) { return std::make_unique<MaxOf>(false, "MaxAbsErr", vector); }
std::unique_ptr<Metric> MakeMaxRelativeErr(bool vector) {
  return std::make_unique<MaxOf>(true, "MaxRelativeErr", vector);
}
std::unique_ptr<Metric> MakeMeanAbsErr() { return std::make_unique<MeanOf>(false, "MeanAbsErr"); }
std::unique_ptr<Metric> MakeMeanRelErr() { return std::make_unique<MeanOf>(true, "MeanRelErr"); }
std::unique_ptr<Metric> MakeErrRatio(double limit, std::string_view column) {
  return std::make_unique<ErrRatio>(limit, column);
}

}  // namespace portkit::accuracy
