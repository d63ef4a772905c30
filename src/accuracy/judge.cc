#include "accuracy/judge.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "accuracy/metrics/metric.h"

namespace portkit::accuracy {

double UnitRoundoff(DType t) {
  switch (t) {
    case DType::kF64: return 0x1p-53;
    case DType::kF32: return 0x1p-24;
    case DType::kF16: return 0x1p-11;
    case DType::kBF16: return 0x1p-8;
    case DType::kF8E4M3: return 0x1p-4;
    case DType::kF8E5M2: return 0x1p-3;
    default: return 0;
  }
}

std::string Brief(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

DType RowDType(const CompareSide& side) { return side.dtype ? ParseDType(*side.dtype) : DType::kUnknown; }

double MaxMagnitude(const TensorStatistics& s) { return std::max(std::fabs(s.max), std::fabs(s.min)); }

void JudgeInContext(std::vector<CompareRow>& rows) {
  for (size_t begin = 0; begin < rows.size();) {
    size_t end = begin;
    while (end < rows.size() && rows[end].target_op == rows[begin].target_op) ++end;
    if (rows[begin].target_op >= 0) {
      bool floating_input = false;
      double scale = 0;
      for (size_t i = begin; i < end; ++i) {
        const CompareRow& r = rows[i];
        if (r.output || r.replay || !IsFloating(RowDType(r.reference))) continue;
        floating_input = true;
        if (r.reference.stats && std::isfinite(MaxMagnitude(*r.reference.stats)))
          scale = std::max(scale, MaxMagnitude(*r.reference.stats));
      }
      for (size_t i = begin; i < end; ++i) {
        CompareRow& r = rows[i];
        if (!r.output) continue;
        DType td = RowDType(r.target), rd = RowDType(r.reference);
        if (!IsFloating(td) && !IsFloating(rd) && td != DType::kUnknown) {
          r.discrete = floating_input;
          continue;
        }
        if (!r.compared || scale <= 0 || !r.target.stats || !r.reference.stats || r.elements < 2) continue;
        double bound = std::max(ToleranceFor(td).small_value, ToleranceFor(rd).small_value) * scale;
        if (MaxMagnitude(*r.reference.stats) > bound || MaxMagnitude(*r.target.stats) > bound) continue;
        r.negligible = true;
        bool bad = !(r.metrics["MaxAbsErr"] <= bound);
        if (r.verdict == Verdict::kNo && !bad)
          r.message = "zero up to rounding in both runs (largest magnitude at most " + Brief(bound) +
                      ", the small-value share of the inputs' " + Brief(scale) + "): judged by absolute error";
        r.verdict = bad ? Verdict::kNo : Verdict::kYes;
      }
    }
    begin = end;
  }
}

void ErrorSummary::Add(const CompareRow& r, const std::string& key) {
  if (r.from_statistics) {
    stats = true;
    auto it = r.metrics.find("StatsRelDiff");
    if (it != r.metrics.end() && (it->second > stats_rel || stats_key.empty())) stats_rel = it->second, stats_key = key;
    return;
  }
  if (!r.compared) return;
  tensors = true;
  // The 1‰ ratio where one rounding of the target type stays inside it (fp64/fp32/fp16); the 5‰
  // ratio for bf16 and fp8.
  DType t = RowDType(r.target);
  const char* col = t == DType::kBF16 || t == DType::kF8E4M3 || t == DType::kF8E5M2 ? "Five Thousandths Err Ratio"
                                                                                      : "One Thousandth Err Ratio";
  double q = r.metrics.at(col), c = r.metrics.at("Cosine"), m = r.metrics.at("MaxAbsErr");
  if (q < ratio || ratio_key.empty()) ratio = q, ratio_key = key;
  if (c < cos || cos_key.empty()) cos = c, cos_key = key;
  if (m > mae || mae_key.empty()) mae = m, mae_key = key;
}

namespace {

/// log10 of a MaxAbsErr, with everything below 1 counted as 0 (msprobe's order of magnitude).
double Order(double mae) { return mae < 1 ? 0 : std::log10(mae); }

/// Whether the outputs' error jumps against the inputs' (msprobe's highlight rules, taken against
/// the worst input so that error carried in by one input is not blamed on the operator); the
/// evidence names the rule and the numbers.
bool ErrorGrows(const ErrorSummary& in, const ErrorSummary& out, std::string& evidence, std::string& basis) {
  if (in.tensors && out.tensors) {
    basis = "error growth";
    if (!std::isnan(in.ratio) && !std::isnan(out.ratio) &&
        ((in.ratio > 0.9 && out.ratio < 0.6) || in.ratio - out.ratio > 0.1)) {
      evidence = out.ratio_key + " error ratio " + Brief(out.ratio) + " (share of elements within the relative "
                 "tolerance), inputs " + Brief(in.ratio) + " (" + in.ratio_key + ")";
      return true;
    }
    if (!std::isnan(in.cos) && !std::isnan(out.cos) && in.cos - out.cos > 0.1) {
      evidence = out.cos_key + " Cosine " + Brief(out.cos) + ", inputs " + Brief(in.cos) + " (" + in.cos_key + ")";
      return true;
    }
    if (out.mae > in.mae && Order(out.mae) - Order(in.mae) >= 1) {
      evidence = out.mae_key + " MaxAbsErr " + Brief(out.mae) + ", inputs " + Brief(in.mae) + " (" + in.mae_key + ")";
      return true;
    }
  }
  if (in.stats && out.stats && out.stats_rel > kStatsRelTolerance && in.stats_rel < 0.01) {
    basis = "statistics growth";
    evidence = out.stats_key + " statistics differ by " + Brief(out.stats_rel) + " (relative), inputs by " +
               Brief(in.stats_rel) + " (" + in.stats_key + ")";
    return true;
  }
  return false;
}

}  // namespace

// The rows of one target operator are consecutive, in the target's execution order (RunCompare
// builds them so): each operator is judged when its rows end, nothing kept for the others.
void DivergenceFinder::Judge(long index, const OpVerdicts& v) {
  Divergence& d = d_;
    if (v.output_bad && d.first_mismatch < 0) d.first_mismatch = index;
    if (d.first_local >= 0) return;
    std::string evidence, basis;
    if (v.replayed) {
      if (v.replay_bad) d.first_local = index, d.basis = "replay",
                        d.evidence = v.replay_key + " (computed from the reference's inputs) differs";
    } else if (v.output_bad && v.inputs_seen && v.inputs_ok) {
      d.first_local = index, d.basis = "inputs matched", d.evidence = v.bad_key + " is No, every input Yes";
    } else if (v.inputs_seen && ErrorGrows(v.in, v.out, evidence, basis)) {
      d.first_local = index, d.basis = basis, d.evidence = evidence;
    } else if (v.output_bad && !v.inputs_seen) {
      d.first_local = index, d.basis = "outputs only", d.evidence = v.bad_key + " is No (no inputs dumped)";
    }
}

void DivergenceFinder::Feed(const std::vector<CompareRow>& rows) {
  auto key_of = &DivergenceFinder::KeyOf;
  long& current = current_;
  OpVerdicts& v = v_;
  for (const auto& r : rows) {
    if (done_) return;
    if (r.target_op < 0 || (r.verdict != Verdict::kYes && r.verdict != Verdict::kNo)) continue;
    if (r.target_op != current) {
      if (current >= 0) Judge(current, v);
      if (d_.first_local >= 0 && d_.first_mismatch >= 0) {
        done_ = true;
        return;
      }
      current = r.target_op, v = OpVerdicts();
    }
    bool bad = r.verdict == Verdict::kNo;
    if (r.replay) {
      // Computed from the reference's inputs, its error is the operator's own: beyond the verdict,
      // No when under 60 % of its elements are within the relative tolerance of one rounding of
      // the target type (msprobe's red line for an output whose inputs are exact); when both runs
      // hold the output in the same type, a kernel that rounds like the reference's leaves nearly
      // every element within that tolerance, so a fall of more than 0.1 from the exact inputs'
      // 1 (msprobe's error-ratio drop) is already the operator's own error.
      ErrorSummary own;
      own.Add(r, key_of(r));
      const double floor = RowDType(r.target) == RowDType(r.reference) ? 0.9 : 0.6;
      bad = bad || (own.tensors && own.ratio < floor);
      v.replayed = true;
      if (bad && !v.replay_bad) v.replay_bad = true, v.replay_key = key_of(r);
    } else if (r.output) {
      if (r.discrete || r.negligible) continue;
      if (bad && !v.output_bad) v.output_bad = true, v.bad_key = key_of(r);
      v.out.Add(r, key_of(r));
    } else {
      v.inputs_seen = true, v.inputs_ok = v.inputs_ok && !bad;
      if (IsFloating(RowDType(r.target))) v.in.Add(r, key_of(r));
    }
  }
}

}  // namespace portkit::accuracy
