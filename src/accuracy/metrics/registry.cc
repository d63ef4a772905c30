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
  return m;
}

}  // namespace portkit::accuracy
