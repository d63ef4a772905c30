#include "tune/operators/operator.h"

#include "tune/operators/conv2d/conv2d_op.h"
#include "tune/operators/gemm/gemm_op.h"

namespace portkit::tune {

void SetTolerance(const std::string& dtype, long terms, Workload& w) {
  // float32 only (the op list parser marks other dtypes untuned); unit roundoff 6e-8.
  (void)dtype;
  w.rtol = 1e-5;
  w.atol = 4e-7 * static_cast<double>(terms > 0 ? terms : 1);
}

void FillDeterministic(std::vector<float>& v, uint64_t seed) {
  Rng rng(seed);
  for (float& x : v) x = static_cast<float>(rng.Unit() * 2.0 - 1.0);
}

Expected<std::unique_ptr<TunableOperator>> MakeOperator(const OpDesc& desc) {
  if (desc.dtype != "float32") return Status(ErrorCode::kUnsupported, "dtype " + desc.dtype + " is not tuned");
  if (desc.type == "MatMul") return std::unique_ptr<TunableOperator>(new GemmOperator(desc));
  if (desc.type == "Conv2D") return std::unique_ptr<TunableOperator>(new Conv2dOperator(desc));
  return Status(ErrorCode::kUnsupported, "operator type " + desc.type + " has no tunable kernel");
}

}  // namespace portkit::tune
