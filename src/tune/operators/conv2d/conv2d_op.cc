#include "tune/operators/conv2d/conv2d_op.h"

#include <algorithm>

#include "tune/operators/gemm/gemm_kernel_source.h"
#include "tune/operators/gemm/gemm_space.h"

namespace portkit::tune {

Conv2dOperator::Conv2dOperator(OpDesc desc) : TunableOperator(std::move(desc)) {
  const auto& d = this->desc();
  oh_ = (d.inputs[0][2] + 2 * d.padding[0] - d.inputs[1][2]) / d.stride[0] + 1;
  ow_ = (d.inputs[0][3] + 2 * d.padding[1] - d.inputs[1][3]) / d.stride[1] + 1;
}

SearchSpace Conv2dOperator::Space(int hardware_threads) const { return GemmSpace(hardware_threads); }

Config Conv2dOperator::DefaultConfig(const SearchSpace& space, int hardware_threads) const {
  return GemmDefault(space, hardware_threads);
}

std::string Conv2dOperator::Source(const SearchSpace& space, const Config& c) const {
  return GemmDefines(space, c) + kGemmCoreSource + kConv2dEntrySource;
}

double Conv2dOperator::Flops() const {
  const auto& x = desc().inputs[0];
  const auto& w = desc().inputs[1];
  return 2.0 * static_cast<double>(x[0]) * static_cast<double>(w[0]) * static_cast<double>(oh_ * ow_) *
         static_cast<double>(w[1] * w[2] * w[3]);
}

Workload Conv2dOperator::MakeWorkload() const {
  const auto& d = desc();
  const auto& x = d.inputs[0];
  const auto& wt = d.inputs[1];
  Workload w;
  w.inputs.resize(3);
  w.inputs[0].resize(static_cast<size_t>(x[0] * x[1] * x[2] * x[3]));
  w.inputs[1].resize(static_cast<size_t>(wt[0] * wt[1] * wt[2] * wt[3]));
  FillDeterministic(w.inputs[0], 11);
  FillDeterministic(w.inputs[1], 12);
  if (d.bias) {
    w.inputs[2].resize(static_cast<size_t>(wt[0]));
    FillDeterministic(w.inputs[2], 13);
  }
  w.dims = {x[0],        x[1],        x[2],         x[3],         wt[0],    wt[2], wt[3],
            d.stride[0], d.stride[1], d.padding[0], d.padding[1], d.groups, oh_,   ow_};
  w.output_size = static_cast<size_t>(x[0] * wt[0] * oh_ * ow_);
  w.reference.resize(w.output_size);
  ReferenceConv2d(w.inputs[0].data(), w.inputs[1].data(), d.bias ? w.inputs[2].data() : nullptr, w.reference.data(),
                  w.dims.data());
  SetTolerance(d.dtype, wt[1] * wt[2] * wt[3], w);
  return w;
}

void ReferenceConv2d(const float* x, const float* w, const float* bias, double* y, const long* d) {
  long N = d[0], C = d[1], H = d[2], W = d[3], O = d[4], KH = d[5], KW = d[6], SH = d[7], SW = d[8], PH = d[9],
       PW = d[10], G = d[11], OH = d[12], OW = d[13];
  long cg = C / G, og = O / G;
  std::vector<double> acc(static_cast<size_t>(OH * OW));
  for (long n = 0; n < N; ++n)
    for (long o = 0; o < O; ++o) {
      long g = o / og;
      std::fill(acc.begin(), acc.end(), bias ? bias[o] : 0.0);
      for (long c = 0; c < cg; ++c)
        for (long kh = 0; kh < KH; ++kh)
          for (long kw = 0; kw < KW; ++kw) {
            double wv = w[((o * cg + c) * KH + kh) * KW + kw];
            const float* plane = x + (n * C + g * cg + c) * H * W;
            for (long oh = 0; oh < OH; ++oh) {
              long ih = oh * SH - PH + kh;
              if (ih < 0 || ih >= H) continue;
              for (long ow = 0; ow < OW; ++ow) {
                long iw = ow * SW - PW + kw;
                if (iw >= 0 && iw < W) acc[static_cast<size_t>(oh * OW + ow)] += wv * plane[ih * W + iw];
              }
            }
          }
      for (long i = 0; i < OH * OW; ++i) y[(n * O + o) * OH * OW + i] = acc[static_cast<size_t>(i)];
    }
}

}  // namespace portkit::tune
