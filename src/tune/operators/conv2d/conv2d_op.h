#pragma once
/// Conv2D, NCHW input and OIHW weight, stride, padding and groups (+ bias[O]); the candidate
/// lowers each image and group to im2col + the blocked GEMM core, whose knobs it shares.
#include "tune/operators/operator.h"

namespace portkit::tune {

class Conv2dOperator : public TunableOperator {
 public:
  explicit Conv2dOperator(OpDesc desc);
  SearchSpace Space(int hardware_threads) const override;
  Config DefaultConfig(const SearchSpace& space, int hardware_threads) const override;
  std::string Source(const SearchSpace& space, const Config& c) const override;
  double Flops() const override;
  Workload MakeWorkload() const override;

  long out_h() const { return oh_; }
  long out_w() const { return ow_; }

 private:
  long oh_, ow_;
};

/// Reference direct convolution accumulated in double. dims as the kernel's:
/// {N, C, H, W, O, KH, KW, SH, SW, PH, PW, G, OH, OW}.
void ReferenceConv2d(const float* x, const float* w, const float* bias, double* y, const long* dims);

}  // namespace portkit::tune
