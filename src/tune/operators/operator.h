#pragma once
/// A tunable operator: its search space, its untuned default, the candidate source for a
/// configuration and the workload (inputs + reference output) candidates are validated on.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tune/op_desc.h"
#include "tune/search_space.h"

namespace portkit::tune {

/// Inputs, kernel dims and the reference output of one operator instance. Inputs are
/// deterministic (fixed-seed) values in [-1, 1).
struct Workload {
  std::vector<std::vector<float>> inputs;  ///< in kernel argument order; an empty one is passed as null
  std::vector<long> dims;                  ///< the kernel's `dims` argument
  size_t output_size = 0;
  std::vector<double> reference;  ///< computed and kept in double precision (fp64)
  double rtol = 0, atol = 0;      ///< |out - ref| <= atol + rtol * |ref|
};

/// Tolerance by dtype for a sum of `terms` products of values in [-1, 1), against the fp64
/// reference: float32 rounding of a blocked (or even a plain sequential) sum grows about as the
/// square root of the length for such data, so atol = 2e-5 * sqrt(terms) (about 330 unit
/// roundoffs times sqrt(terms)), rtol = 1e-5. A kernel that rounds its inputs to fp16 is off by
/// about 1e-4 * sqrt(terms) and fails at every length (docs/tune.md, "Validation").
constexpr double kAtolPerSqrtTerm = 2e-5;
void SetTolerance(const std::string& dtype, long terms, Workload& w);

class TunableOperator {
 public:
  explicit TunableOperator(OpDesc desc) : desc_(std::move(desc)) {}
  virtual ~TunableOperator() = default;
  const OpDesc& desc() const { return desc_; }

  /// The knobs and constraints; `hardware_threads` bounds the THREADS knob.
  virtual SearchSpace Space(int hardware_threads) const = 0;
  /// The untuned default strategy (what runs when nothing is tuned).
  virtual Config DefaultConfig(const SearchSpace& space, int hardware_threads) const = 0;
  /// Complete C++ source of the candidate for `c` (exports `portkit_kernel`).
  virtual std::string Source(const SearchSpace& space, const Config& c) const = 0;
  /// Floating-point operations of one call (2 per multiply-add).
  virtual double Flops() const = 0;
  /// Inputs and reference output (cost: one naive evaluation in double precision).
  virtual Workload MakeWorkload() const = 0;

 private:
  OpDesc desc_;
};

/// The operator for a supported description (MatMul, Conv2D); kUnsupported otherwise.
Expected<std::unique_ptr<TunableOperator>> MakeOperator(const OpDesc& desc);

/// 16 hex digits of FNV-1a over the candidate source an operator type generates for its default
/// configuration (the kernel template, the knob defines and the default), "" for a type without
/// a tunable kernel. Part of the bank key: a changed template misses instead of reusing entries
/// measured on other code. Shapes are run-time arguments, so the source does not depend on them.
std::string KernelTemplateHash(std::string_view op_type);

/// Fills `v` with deterministic values in [-1, 1).
void FillDeterministic(std::vector<float>& v, uint64_t seed);

}  // namespace portkit::tune
