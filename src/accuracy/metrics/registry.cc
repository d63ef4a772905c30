#include <cmath>

#include "accuracy/metrics/metric.h"

namespace portkit::accuracy {

std::vector<std::unique_ptr<Metric>> MakeMetrics(DType target) {
  std::vector<std::unique_ptr<Metric>> m;
  m.push_back(MakeCosine());
  m.push_back(MakeEuclideanDistance());
  m.push_back(MakeMaxAbsErr());
  m.push_back(MakeMaxRelativeErr());
  m.push_back(MakeErrRatio(0.001, "One Thousandth Err Ratio"));
  m.push_back(MakeErrRatio(0.005, "Five Thousandths Err Ratio"));
  m.push_back(MakeRmse());
  m.push_back(MakeMeanAbsErr());
  m.push_back(MakeMeanRelErr());
  m.push_back(MakeKlDivergence());
  m.push_back(MakeMaxUlpError(target));
  m.push_back(MakeSmallValueErrRatio(target));
  return m;
}

MetricSet::MetricSet(DType target) : metrics_(MakeMetrics(target)), abs_err_(kChunk), rel_err_(kChunk) {}

void MetricSet::Accumulate(const double* n, const double* b, size_t count) {
  for (size_t at = 0; at < count; at += kChunk) {
    size_t c = std::min(kChunk, count - at);
    const double* nn = n + at;
    const double* bb = b + at;
    double* ae = abs_err_.data();
    double* re = rel_err_.data();
    for (size_t i = 0; i < c; ++i) {
      double d = std::fabs(nn[i] - bb[i]);
      d = nn[i] == bb[i] ? 0.0 : d;  // the same infinity on both sides is no error
      double scale = std::fabs(bb[i]);
      ae[i] = d;
      double r = d / (scale > kRelGuard ? scale : kRelGuard);
      re[i] = r != r && d == d ? INFINITY : r;  // an inf reference against a finite target: inf, not inf/inf
    }
    Chunk chunk{nn, bb, ae, re, c};
    for (auto& m : metrics_) m->Accumulate(chunk);
  }
}

void MetricSet::Merge(const MetricSet& later) {
  for (size_t i = 0; i < metrics_.size(); ++i) metrics_[i]->Merge(*later.metrics_[i]);
}

std::map<std::string, double> MetricSet::Results() const {
  std::map<std::string, double> out;
  for (const auto& m : metrics_) out[std::string(m->name())] = m->Finalize();
  return out;
}

}  // namespace portkit::accuracy
