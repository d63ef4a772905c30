#pragma once
/// The judge pass of `RunCompare` (api.h): verdicts that need an operator's other tensors, and the
/// search for the first operator whose own error crosses the threshold (the report's culprit).
/// Internal to the accuracy engine.
#include <algorithm>
#include <string>
#include <vector>

#include "accuracy/api.h"
#include "accuracy/dtype.h"

namespace portkit::accuracy {

/// Statistics-only rows: No when a statistic differs by more than this share of its scale (and by
/// more than an absolute tolerance, compare.cc).
constexpr double kStatsRelTolerance = 0.1;

/// Unit roundoff of a floating type (half its machine epsilon); 0 for other types.
double UnitRoundoff(DType t);

/// Half the smallest subnormal of a floating type (the absolute error of rounding a value below its
/// normal range: 2^-25 for fp16); 0 for other types.
double SubnormalRounding(DType t);

/// The relative error one rounding to `t` makes in a tensor of root mean square `rms`: the unit
/// roundoff, and the subnormal spacing's share of `rms` (fp16 gradients of 1e-6 lie below fp16's
/// normal range, 6.1e-5, where the spacing is absolute).
double Rounding(DType t, double rms);

/// Three significant digits, for messages.
std::string Brief(double v);

/// A side's element type; kUnknown when it has none.
DType RowDType(const CompareSide& side);

/// The largest magnitude of a tensor's values.
double MaxMagnitude(const TensorStatistics& s);

/// Judgements that need the operator's other tensors, made once every row of it has its metrics:
/// integer outputs of an operator with floating inputs are marked `discrete`, and floating outputs
/// that are zero up to rounding in both runs (largest magnitude at most the small-value threshold
/// of the coarser type, 2^-20 for fp32 and 2^-10 for 16-bit types, times the magnitude of the
/// inputs the output is linear in: the smallest largest-magnitude of its multi-element floating
/// inputs) are `negligible`: judged by MaxAbsErr against that bound instead of by cosine.
void JudgeInContext(std::vector<CompareRow>& rows);

/// The first operator whose *own* error crosses the threshold, and on what that is judged.
struct Divergence {
  long first_local = -1;     ///< target op position
  long first_mismatch = -1;  ///< the earliest op with any output judged No
  std::string basis;         ///< "replay", "inputs matched", "error growth", ... or "" (none)
  std::string evidence;
  /// The earliest op whose outputs' error exceeds what rounding and its inputs' error allow, but
  /// not by enough to blame it without replay (precision drift); -1 when none.
  long drift_start = -1;
  std::string drift_evidence;
};

/// The error of a set of tensors of one operator (its inputs, or its outputs): the worst of each
/// measure, and which tensor it came from.
struct ErrorSummary {
  bool tensors = false, stats = false;  ///< compared from data / from statistics
  double ratio = 1, cos = 1, mae = 0, stats_rel = 0;
  std::string ratio_key, cos_key, mae_key, stats_key;
  void Add(const CompareRow& r, const std::string& key);
};

/// What the judge keeps of one row of the operator being judged.
struct JudgedTensor {
  std::string key;  ///< `input.0`, `output.0`, `replay.output.0`, `replay.baseline.output.0`
  bool output = false, replay = false, baseline = false;
  bool compared = false, bad = false, skip = false;  ///< skip: discrete or negligible output
  bool nonfinite = false;                            ///< an inf/nan that the other run lacks
  DType target = DType::kUnknown, reference = DType::kUnknown;
  double numel = 0, rmse = 0, rms = 0, max_abs_err = 0, ratio = 1;
  double mean = 0, max_magnitude = 0;  ///< of the reference's values
  /// RMSE relative to the reference's root mean square (0 when both are 0, inf when only the
  /// reference is 0).
  double Relative() const;
};

/// Per target op in execution order, precision-aware. Each output is allowed the error that one
/// rounding of its target and reference types and its inputs' error cause after the operator's
/// amplification (Amplification: the conditioning Σ|terms| / |Σ| of sums and contractions, the
/// input range of exponentials, the mean against the spread for normalisations). An op with
/// replayed outputs is local when a replayed output's own error (beyond its baseline, the same
/// quantised inputs in the reference's precision, when the dump has one) exceeds one rounding of
/// its type ("replay"). Otherwise it is local when its inputs are exact and an output is No or
/// beyond its allowance ("inputs matched"), or when an output exceeds its allowance 32 times over
/// ("error growth"), or for stats-only dumps when a statistic jumps ("statistics growth"), or when
/// an output is No and no input was compared ("outputs only"). An output beyond its allowance
/// but under the blame factor marks the start of precision drift instead. Discrete and negligible
/// outputs are not used. Fed the rows in order, a batch at a time (a batch ends where an
/// operator's rows end).
class DivergenceFinder {
 public:
  void Feed(const std::vector<CompareRow>& rows);
  Divergence Finish() {
    if (!done_ && current_ >= 0) Judge(current_);
    done_ = true;
    return d_;
  }

 private:
  static std::string KeyOf(const CompareRow& r) {
    const std::string& n = r.target.name;
    size_t dot = n.find(".input."), dot2 = n.find(".output."), dot3 = n.find(".replay.");
    size_t at = std::min({dot, dot2, dot3});
    return at == std::string::npos ? n : n.substr(at + 1);
  }
  /// What the judgement of one operator needs of its inputs and outputs.
  struct OpSummary {
    bool output_bad = false, output_nonfinite = false, inputs_seen = false, inputs_exact = true, inputs_ok = true;
    std::string bad_key;  ///< the first output judged No
    /// That output's relative error is within what rounding and its inputs' error allow.
    bool bad_within_rounding = false;
    /// An integer input (indices, positions) differs: the output's error cannot be weighed
    /// against the inputs' relative error, so it is not blamed for error growth.
    bool discrete_input_bad = false;
    double in_rel = 0;  ///< the inputs' largest relative error
    /// The output furthest beyond its allowance, by how much, and the lowest error ratio.
    double excess = 0, worst_rel = 0, worst_allowed = 0, worst_ratio = 1;
    std::string worst_key, ratio_key;
    std::string Evidence(const char* what) const;
  };
  void Add(const CompareRow& r);
  OpSummary Summarise() const;
  void Judge(long index);
  bool JudgeReplay(long index);
  bool JudgeExactInputs(long index, const OpSummary& o);
  Divergence d_;
  long current_ = -1;
  std::string op_name_;                ///< of the current op, without namespace and overload
  std::vector<JudgedTensor> tensors_;  ///< of the current op
  ErrorSummary stats_in_, stats_out_;  ///< of the current op's stats-only rows
  bool done_ = false;
};

/// How much an output's relative error may exceed its inputs' (and one rounding): for sums and
/// contractions Σ|terms| / |Σ| estimated from the tensors' sizes and root mean squares (random
/// terms: √T·rms(term) / rms(output), T the terms per output element), for normalisations
/// rms / spread of the input, for exponentials 1 + the largest input magnitude; at least 1. For
/// contractions and backward operators, a reduction of the largest input (a bias gradient) and
/// every pair of operands as a product.
/// `op` is the operator's name without namespace or overload (`addmm`, `native_layer_norm`).
/// `input_error`: how the inputs' error grows (exponentials included); otherwise only how the
/// operator's own rounding does.
double Amplification(const std::string& op, const std::vector<JudgedTensor>& tensors, const JudgedTensor& output,
                     bool input_error = true);

}  // namespace portkit::accuracy
