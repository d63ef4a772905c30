#include "tune/operators/operator.h"

#include <cmath>
#include <cstdio>

#include "tune/operators/conv2d/conv2d_op.h"
#include "tune/operators/gemm/gemm_op.h"

namespace portkit::tune {

void SetTolerance(const std::string& dtype, long terms, Workload& w) {
  // float32 only (the op list parser marks other dtypes untuned); unit roundoff 6e-8.
  (void)dtype;
  w.rtol = 1e-5;
  w.atol = kAtolPerSqrtTerm * std::sqrt(static_cast<double>(terms > 0 ? terms : 1));
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

std::string KernelTemplateHash(std::string_view op_type) {
  OpDesc d;
  d.name = "template";
  d.type = std::string(op_type);
  if (op_type == "MatMul") {
    d.layout = "ND";
    d.inputs = {{8, 8}, {8, 8}};
  } else if (op_type == "Conv2D") {
    d.layout = "NCHW";
    d.inputs = {{1, 1, 3, 3}, {1, 1, 1, 1}};
  } else {
    return "";
  }
  auto op = MakeOperator(d);
  if (!op.ok()) return "";
  SearchSpace space = (*op)->Space(1);
  std::string source = (*op)->Source(space, (*op)->DefaultConfig(space, 1));
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : source) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace portkit::tune
