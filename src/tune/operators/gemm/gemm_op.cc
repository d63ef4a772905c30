#include "tune/operators/gemm/gemm_op.h"

#include "tune/operators/gemm/gemm_kernel_source.h"
#include "tune/operators/gemm/gemm_space.h"

namespace portkit::tune {

GemmOperator::GemmOperator(OpDesc desc)
    : TunableOperator(std::move(desc)),
      m_(this->desc().inputs[0][0]),
      n_(this->desc().inputs[1][1]),
      k_(this->desc().inputs[0][1]) {}

SearchSpace GemmOperator::Space(int hardware_threads) const { return GemmSpace(hardware_threads); }

Config GemmOperator::DefaultConfig(const SearchSpace& space, int hardware_threads) const {
  return GemmDefault(space, hardware_threads);
}

std::string GemmOperator::Source(const SearchSpace& space, const Config& c) const {
  return GemmDefines(space, c) + kGemmCoreSource + kGemmEntrySource;
}

double GemmOperator::Flops() const { return 2.0 * static_cast<double>(m_) * static_cast<double>(n_) * k_; }

Workload GemmOperator::MakeWorkload() const {
  Workload w;
  w.inputs.resize(3);
  w.inputs[0].resize(static_cast<size_t>(m_ * k_));
  w.inputs[1].resize(static_cast<size_t>(k_ * n_));
  FillDeterministic(w.inputs[0], 1);
  FillDeterministic(w.inputs[1], 2);
  if (desc().bias) {
    w.inputs[2].resize(static_cast<size_t>(n_));
    FillDeterministic(w.inputs[2], 3);
  }
  w.dims = {m_, n_, k_};
  w.output_size = static_cast<size_t>(m_ * n_);
  w.reference.resize(w.output_size);
  ReferenceGemm(w.inputs[0].data(), w.inputs[1].data(), desc().bias ? w.inputs[2].data() : nullptr, w.reference.data(),
                m_, n_, k_);
  SetTolerance(desc().dtype, k_, w);
  return w;
}

void ReferenceGemm(const float* a, const float* b, const float* bias, double* c, long m, long n, long k) {
  std::vector<double> acc(static_cast<size_t>(n));
  for (long i = 0; i < m; ++i) {
    for (long j = 0; j < n; ++j) acc[static_cast<size_t>(j)] = bias ? bias[j] : 0.0;
    for (long p = 0; p < k; ++p) {
      double av = a[i * k + p];
      const float* brow = b + p * n;
      for (long j = 0; j < n; ++j) acc[static_cast<size_t>(j)] += av * brow[j];
    }
    for (long j = 0; j < n; ++j) c[i * n + j] = acc[static_cast<size_t>(j)];
  }
}

}  // namespace portkit::tune
