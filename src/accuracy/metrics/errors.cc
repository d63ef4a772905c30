// Metrics on the element errors: EucDist = ‖N−B‖₂, MaxAbsErr = max|N−B|, MaxRelativeErr = max RE,
// RMSE, mean absolute and mean relative error (RE = |N−B| / max(|B|, 1e-10)). A nan element makes
// them nan; an inf one (on one side) makes them inf.
#include <cmath>
#include <limits>

#include "accuracy/metrics/metric.h"

namespace portkit::accuracy {
namespace {

double Abs(double n, double b) {
  if (std::isnan(n) || std::isnan(b)) return NAN;
  if (std::isinf(n) && std::isinf(b) && (n > 0) == (b > 0)) return 0.0;  // the same infinity
  return std::fabs(n - b);
}

double Rel(double n, double b) { return Abs(n, b) / std::max(std::fabs(b), kRelGuard); }

class SumSquares : public Metric {
 public:
  SumSquares(bool root_mean, std::string_view column) : root_mean_(root_mean), column_(column) {}
  std::string_view name() const override { return column_; }
  void Accumulate(const double* n, const double* b, size_t count) override {
    for (size_t i = 0; i < count; ++i) {
      double d = Abs(n[i], b[i]);
      sum_ += d * d;
    }
    count_ += count;
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
  MaxOf(bool relative, std::string_view column) : relative_(relative), column_(column) {}
  std::string_view name() const override { return column_; }
  void Accumulate(const double* n, const double* b, size_t count) override {
    for (size_t i = 0; i < count; ++i) {
      double e = relative_ ? Rel(n[i], b[i]) : Abs(n[i], b[i]);
      if (std::isnan(e)) nan_ = true;
      else if (e > max_) max_ = e;
    }
  }
  double Finalize() const override { return nan_ ? NAN : max_; }

 private:
  bool relative_;
  std::string_view column_;
  double max_ = 0;
  bool nan_ = false;
};

class MeanOf : public Metric {
 public:
  MeanOf(bool relative, std::string_view column) : relative_(relative), column_(column) {}
  std::string_view name() const override { return column_; }
  void Accumulate(const double* n, const double* b, size_t count) override {
    for (size_t i = 0; i < count; ++i) sum_ += relative_ ? Rel(n[i], b[i]) : Abs(n[i], b[i]);
    count_ += count;
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
  void Accumulate(const double* n, const double* b, size_t count) override {
    for (size_t i = 0; i < count; ++i) within_ += Rel(n[i], b[i]) < limit_;  // nan compares false
    count_ += count;
  }
  double Finalize() const override { return count_ ? static_cast<double>(within_) / static_cast<double>(count_) : 1.0; }

 private:
  double limit_;
  std::string_view column_;
  size_t within_ = 0, count_ = 0;
};

}  // namespace

std::unique_ptr<Metric> MakeEuclideanDistance() { return std::make_unique<SumSquares>(false, "EucDist"); }
std::unique_ptr<Metric> MakeRmse() { return std::make_unique<SumSquares>(true, "RMSE"); }
std::unique_ptr<Metric> MakeMaxAbsErr() { return std::make_unique<MaxOf>(false, "MaxAbsErr"); }
std::unique_ptr<Metric> MakeMaxRelativeErr() { return std::make_unique<MaxOf>(true, "MaxRelativeErr"); }
std::unique_ptr<Metric> MakeMeanAbsErr() { return std::make_unique<MeanOf>(false, "MeanAbsErr"); }
std::unique_ptr<Metric> MakeMeanRelErr() { return std::make_unique<MeanOf>(true, "MeanRelErr"); }
std::unique_ptr<Metric> MakeErrRatio(double limit, std::string_view column) {
  return std::make_unique<ErrRatio>(limit, column);
}

}  // namespace portkit::accuracy
