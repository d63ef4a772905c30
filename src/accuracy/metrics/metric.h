#pragma once
/// Comparison metrics (FORMATS.md §2): each accumulates over chunks of elements (target N,
/// reference B, decoded to double) and finalises once, so a tensor of any size streams through
/// in constant memory. One file per metric; MakeMetrics lists them in column order.
#include <memory>
#include <string_view>
#include <vector>

#include "accuracy/dtype.h"

namespace portkit::accuracy {

/// Relative error guard: RE = |N - B| / max(|B|, kRelGuard).
constexpr double kRelGuard = 1e-10;

class Metric {
 public:
  virtual ~Metric() = default;
  /// The result column ("Cosine", "MaxAbsErr", ...).
  virtual std::string_view name() const = 0;
  virtual void Accumulate(const double* n, const double* b, size_t count) = 0;
  virtual double Finalize() const = 0;
};

std::unique_ptr<Metric> MakeCosine();
std::unique_ptr<Metric> MakeEuclideanDistance();
std::unique_ptr<Metric> MakeMaxAbsErr();
std::unique_ptr<Metric> MakeMaxRelativeErr();
/// Share of elements with RE below `limit` (0.001: One Thousandth, 0.005: Five Thousandths).
std::unique_ptr<Metric> MakeErrRatio(double limit, std::string_view column);
std::unique_ptr<Metric> MakeRmse();
std::unique_ptr<Metric> MakeMeanAbsErr();
std::unique_ptr<Metric> MakeMeanRelErr();
/// KL(B || N) over the element magnitudes normalised to distributions.
std::unique_ptr<Metric> MakeKlDivergence();
/// Largest |N - B| in units in the last place of B in the target's floating type.
std::unique_ptr<Metric> MakeMaxUlpError(DType target);

/// Every metric, in the result file's column order.
std::vector<std::unique_ptr<Metric>> MakeMetrics(DType target);

}  // namespace portkit::accuracy
