#pragma once
/// MatMul / Linear: C[M,N] = A[M,K] * B[K,N] (+ bias[N]).
#include "tune/operators/operator.h"

namespace portkit::tune {

class GemmOperator : public TunableOperator {
 public:
  explicit GemmOperator(OpDesc desc);
  SearchSpace Space(int hardware_threads) const override;
  Config DefaultConfig(const SearchSpace& space, int hardware_threads) const override;
  std::string Source(const SearchSpace& space, const Config& c) const override;
  double Flops() const override;
  Workload MakeWorkload() const override;

 private:
  long m_, n_, k_;
};

/// Reference: C = A * B (+ bias) accumulated in double.
void ReferenceGemm(const float* a, const float* b, const float* bias, double* c, long m, long n, long k);

}  // namespace portkit::tune
