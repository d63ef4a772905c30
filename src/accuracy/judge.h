#pragma once
/// The judge pass of `RunCompare` (api.h): verdicts that need an operator's other tensors, and the
/// search for the first operator whose own error crosses the threshold (the report's culprit).
/// Internal to the accuracy engine.
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

/// Three significant digits, for messages.
std::string Brief(double v);

/// A side's element type; kUnknown when it has none.
DType RowDType(const CompareSide& side);

/// The largest magnitude of a tensor's values.
double MaxMagnitude(const TensorStatistics& s);

/// Judgements that need the operator's other tensors, made once every row of it has its metrics:
/// integer outputs of an operator with floating inputs are marked `discrete`, and floating outputs
/// that are zero up to rounding in both runs (largest magnitude at most the small-value threshold
/// of the coarser type, 2^-20 for fp32 and 2^-10 for 16-bit types, times the largest input
/// magnitude) are `negligible`: judged by MaxAbsErr against that bound instead of by cosine.
void JudgeInContext(std::vector<CompareRow>& rows);

/// The first operator whose *own* error crosses the threshold, and on what that is judged.
struct Divergence {
  long first_local = -1;     ///< target op position
  long first_mismatch = -1;  ///< the earliest op with any output judged No
  std::string basis;         ///< "replay", "inputs matched", "error growth", ... or "" (none)
  std::string evidence;
};

/// The error of a set of tensors of one operator (its inputs, or its outputs): the worst of each
/// measure, and which tensor it came from.
struct ErrorSummary {
  bool tensors = false, stats = false;  ///< compared from data / from statistics
  double ratio = 1, cos = 1, mae = 0, stats_rel = 0;
  std::string ratio_key, cos_key, mae_key, stats_key;
  void Add(const CompareRow& r, const std::string& key);
};

/// Per target op in execution order. An op with replayed outputs is local when a replayed output
/// is No (its inputs were the reference's). Otherwise: when a judged output is No while every
/// compared input is Yes ("inputs matched"), when its outputs' error jumps against its inputs'
/// (ErrorGrows), or when an output is No and no input was compared ("outputs only"). Discrete and
/// negligible outputs are not used.
/// Fed the rows in order, a batch at a time (a batch ends where an operator's rows end).
class DivergenceFinder {
 public:
  void Feed(const std::vector<CompareRow>& rows);
  Divergence Finish() {
    if (!done_ && current_ >= 0) Judge(current_, v_);
    done_ = true;
    return d_;
  }

 private:
  struct OpVerdicts {
    bool replayed = false, replay_bad = false, output_bad = false, inputs_seen = false, inputs_ok = true;
    std::string replay_key, bad_key;
    ErrorSummary in, out;
  };
  static std::string KeyOf(const CompareRow& r) {
    const std::string& n = r.target.name;
    size_t dot = n.find(".input."), dot2 = n.find(".output."), dot3 = n.find(".replay.");
    size_t at = std::min({dot, dot2, dot3});
    return at == std::string::npos ? n : n.substr(at + 1);
  }
  void Judge(long index, const OpVerdicts& v);
  Divergence d_;
  long current_ = -1;
  OpVerdicts v_;
  bool done_ = false;
};

}  // namespace portkit::accuracy
