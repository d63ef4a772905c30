#pragma once
/// Source text of the candidate kernels (see gemm_kernel_source.cc).

namespace portkit::tune {

/// The blocked GEMM core; needs the PK_* knob macros defined before it.
extern const char kGemmCoreSource[];
/// `portkit_kernel` for MatMul: in = {A, B, bias or null}, dims = {M, N, K}.
extern const char kGemmEntrySource[];
/// `portkit_kernel` for Conv2D (im2col + the core GEMM).
extern const char kConv2dEntrySource[];

}  // namespace portkit::tune
