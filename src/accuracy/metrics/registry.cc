#include <cmath>

#include "accuracy/metrics/metric.h"
#include "accuracy/metrics/simd.h"

namespace portkit::accuracy {

bool VectorLoopsAvailable() {
#ifdef PORTKIT_ACCURACY_AVX2
  return simd::CpuHasAvx2();
#else
  return false;
#endif
}

std::vector<std::unique_ptr<Metric>> MakeMetrics(DType target, bool vector) {
  std::vector<std::unique_ptr<Metric>> m;
  m.push_back(MakeCosine(vector));
  m.push_back(MakeEuclideanDistance());
  m.push_back(MakeMaxAbsErr(vector));
  m.push_back(MakeMaxRelativeErr(vector));
  m.push_back(MakeErrRatio(0.001, "One Thousandth Err Ratio"));
  m.push_back(MakeErrRatio(0.005, "Five Thousandths Err Ratio"));
  m.push_back(MakeRmse());
  m.push_back(MakeMeanAbsErr());
  m.push_back(MakeMeanRelErr());
  m.push_back(MakeKlDivergence(vector));
  m.push_back(MakeMaxUlpError(target, vector));
  m.push_back(MakeSmallValueErrRatio(target, vector));
  return m;
}

namespace {

/// |N − B| (0 where equal, the same infinity included) and RE = |N − B| / max(|B|, guard), with an
/// inf reference against a finite target giving inf, not inf/inf.
inline __attribute__((always_inline)) void ElementErrorsScalar(const double* n, const double* b, size_t c, double* ae,
                                                               double* re) {
  for (size_t i = 0; i < c; ++i) {
    double d = std::fabs(n[i] - b[i]);
    d = n[i] == b[i] ? 0.0 : d;
    double scale = std::fabs(b[i]);
    double r = d / (scale > kRelGuard ? scale : kRelGuard);
    ae[i] = d;
    re[i] = r != r && d == d ? INFINITY : r;
  }
}

#ifdef PORTKIT_ACCURACY_AVX2
PORTKIT_AVX2_FN void ElementErrorsAvx2(const double* n, const double* b, size_t c, double* ae, double* re) {
  using namespace simd;
  size_t i = 0;
  for (; i + 4 <= c; i += 4) {
    V4d nv = Load(n + i), bv = Load(b + i);
    V4d d = Select(nv == bv, V4d{}, Abs(nv - bv));
    V4d scale = Abs(bv);
    V4d r = d / Select(scale > kRelGuard, scale, V4d{} + kRelGuard);
    Store(ae + i, d);
    Store(re + i, Select((r != r) & (d == d), V4d{} + INFINITY, r));
  }
  // Inlined, not a tail call: a jump into SSE code would skip the vzeroupper that GCC puts before
  // returns and calls, and SSE code after dirty upper halves runs several times slower.
  ElementErrorsScalar(n + i, b + i, c - i, ae + i, re + i);
}
#endif

}  // namespace

MetricSet::MetricSet(DType target, bool vector)
    : metrics_(MakeMetrics(target, vector && VectorLoopsAvailable())),
      abs_err_(kChunk),
      rel_err_(kChunk),
      avx2_(vector && VectorLoopsAvailable()),
      fused_(avx2_ && target == DType::kF32) {}

void MetricSet::ReleaseScratch() {
  std::vector<double>().swap(abs_err_);
  std::vector<double>().swap(rel_err_);
}

void MetricSet::Accumulate(const double* n, const double* b, size_t count) {
  if (abs_err_.size() < kChunk) abs_err_.assign(kChunk, 0.0), rel_err_.assign(kChunk, 0.0);
  for (size_t at = 0; at < count; at += kChunk) {
    size_t c = std::min(kChunk, count - at);
    const double* nn = n + at;
    const double* bb = b + at;
    double* ae = abs_err_.data();
    double* re = rel_err_.data();
#ifdef PORTKIT_ACCURACY_AVX2
    if (avx2_) ElementErrorsAvx2(nn, bb, c, ae, re);
    else ElementErrorsScalar(nn, bb, c, ae, re);
#else
    ElementErrorsScalar(nn, bb, c, ae, re);
#endif
    Chunk chunk{nn, bb, ae, re, c};
    for (auto& m : metrics_) m->Accumulate(chunk);
  }
}

bool MetricSet::AccumulateF32(const uint8_t* n, const uint8_t* b, size_t count, FusedSums& stats) {
  if (!fused_ || count != kChunk || !FusedChunkF32(n, b, count, stats)) return false;
  for (auto& m : metrics_) m->AccumulateFused(stats);
  return true;
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
