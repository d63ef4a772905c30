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

double SubnormalRounding(DType t) {
  // Half the smallest subnormal: the absolute error of rounding a value below the normal range.
  switch (t) {
    case DType::kF64: return 0x1p-1074;  // (half of it is not a double)
    case DType::kF32: return 0x1p-150;
    case DType::kF16: return 0x1p-25;
    case DType::kBF16: return 0x1p-134;
    case DType::kF8E4M3: return 0x1p-10;
    case DType::kF8E5M2: return 0x1p-17;
    default: return 0;
  }
}

double Rounding(DType t, double rms) { return UnitRoundoff(t) + (rms > 0 ? SubnormalRounding(t) / rms : 0); }

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
      // The scale an output is linear in: the smallest of the floating inputs' magnitudes (a
      // gradient of 1e-6 times an activation of 1 is of the gradient's scale, not the
      // activation's); one-element inputs (scalars, eps) and all-zero ones do not set it.
      double scale = 0, largest = 0;
      for (size_t i = begin; i < end; ++i) {
        const CompareRow& r = rows[i];
        if (r.output || r.replay || !IsFloating(RowDType(r.reference))) continue;
        floating_input = true;
        if (!r.reference.stats || !std::isfinite(MaxMagnitude(*r.reference.stats))) continue;
        const double m = MaxMagnitude(*r.reference.stats);
        largest = std::max(largest, m);
        if (r.elements >= 2 && m > 0) scale = scale > 0 ? std::min(scale, m) : m;
      }
      if (scale <= 0) scale = largest;
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
                      ", the small-value share of the inputs' scale " + Brief(scale) + "): judged by absolute error";
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

double JudgedTensor::Relative() const {
  if (!std::isfinite(rms)) return rmse > 0 ? INFINITY : 0;  // inf in the data (a mask): no scale
  if (rms > 0) return rmse / rms;
  return rmse > 0 ? INFINITY : 0;
}

namespace {

bool OneOf(const std::string& op, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (op == n) return true;
  return false;
}

/// Operators whose outputs sum products of their inputs' elements.
bool Contraction(const std::string& op) {
  return OneOf(op, {"mm",
                    "bmm",
                    "addmm",
                    "addbmm",
                    "baddbmm",
                    "matmul",
                    "linear",
                    "dot",
                    "mv",
                    "addmv",
                    "einsum",
                    "convolution",
                    "_convolution",
                    "conv1d",
                    "conv2d",
                    "conv3d",
                    "convolution_backward",
                    "mkldnn_convolution",
                    "_scaled_dot_product_attention",
                    "scaled_dot_product_attention",
                    "_scaled_dot_product_flash_attention_for_cpu",
                    "_scaled_dot_product_efficient_attention",
                    "_scaled_dot_product_flash_attention",
                    "linear_backward",
                    "mkldnn_rnn",
                    "_thnn_fused_lstm_cell",
                    "_thnn_fused_gru_cell",
                    "lstm",
                    "gru",
                    "rnn_tanh"}) ||
         op.find("backward") != std::string::npos;
}

/// The backward operators of modules (`convolution_backward`, `native_layer_norm_backward`): some
/// of their outputs sum one input over the batch (a bias gradient).
bool Backward(const std::string& op) { return op.find("backward") != std::string::npos; }

/// Operators whose outputs add their inputs' elements (so cancel).
bool Additive(const std::string& op) {
  return Contraction(op) || OneOf(op, {"add",
                                       "sub",
                                       "rsub",
                                       "sum",
                                       "mean",
                                       "nansum",
                                       "cumsum",
                                       "addcmul",
                                       "addcdiv",
                                       "index_add",
                                       "scatter_add",
                                       "sum_to_size",
                                       "var",
                                       "std",
                                       "var_mean",
                                       "std_mean",
                                       "embedding_dense_backward",
                                       "lerp",
                                       "_foreach_add",
                                       "where"});
}

bool Exponential(const std::string& op) {
  return OneOf(op, {"exp", "exp2", "expm1", "softmax", "_softmax", "log_softmax", "_log_softmax", "sigmoid", "silu",
                    "elu", "softplus", "pow", "_safe_softmax", "logsumexp"});
}

bool Normalisation(const std::string& op) {
  return op.find("norm") != std::string::npos && op.find("backward") == std::string::npos;
}

/// Every pair of operands of a product: T = √(numel(x)·numel(y) / numel(out)) products per output
/// element, √T · rms(x) · rms(y) / rms(out). With a `gradient` (a backward operator's first
/// argument) only the pairs that hold it.
double PairAmplification(const std::vector<const JudgedTensor*>& in, const JudgedTensor* gradient,
                         const JudgedTensor& output) {
  double a = 1;
  for (size_t i = 0; i < in.size(); ++i)
    for (size_t j = i + 1; j < in.size(); ++j) {
      if (gradient && in[i] != gradient && in[j] != gradient) continue;
      const double terms = std::max(1.0, std::sqrt(in[i]->numel * in[j]->numel / output.numel));
      a = std::max(a, std::sqrt(terms) * in[i]->rms * in[j]->rms / output.rms);
    }
  return a;
}

/// A normalisation of x: rms / spread of the whole tensor, and each group (a channel, a row) is
/// normalised by its own spread: the narrowest one, 1 / the largest saved 1/σ (output 2 of
/// native_batch_norm, native_layer_norm, native_group_norm), sets how far an absolute error in x
/// grows (a channel of σ 0.003 in activations of rms 0.7).
double NormalisationAmplification(const std::vector<JudgedTensor>& tensors, const JudgedTensor& x) {
  double a = 1;
  const double spread = std::sqrt(std::max(0.0, x.rms * x.rms - x.mean * x.mean));
  if (spread > 0) a = std::max(a, x.rms / spread);
  for (const auto& t : tensors)
    if (t.output && !t.replay && t.key == "output.2" && t.compared && t.numel > 0 && std::isfinite(t.max_magnitude))
      a = std::max(a, x.rms * t.max_magnitude);
  return a;
}

}  // namespace

double Amplification(const std::string& op, const std::vector<JudgedTensor>& tensors, const JudgedTensor& output,
                     bool input_error) {
  // The floating inputs with data, largest first.
  std::vector<const JudgedTensor*> in;
  for (const auto& t : tensors)
    if (!t.output && !t.replay && t.compared && IsFloating(t.reference) && t.numel > 0) in.push_back(&t);
  std::stable_sort(in.begin(), in.end(), [](const JudgedTensor* a, const JudgedTensor* b) {
    return a->numel != b->numel ? a->numel > b->numel : a->rms > b->rms;
  });
  double a = 1;
  if (in.empty() || !(output.rms > 0) || !(output.numel > 0)) return a;
  // A backward operator's outputs are linear in the incoming gradient, its first argument: every
  // term is that gradient times another operand, and a bias gradient sums it. Pairs of the other
  // operands (a layer norm's input and its 1/σ, of 30 and 1e4 against a gradient of 1e-6) are in
  // other units than the output.
  const JudgedTensor* gradient = nullptr;
  if (Backward(op))
    for (const auto* t : in)
      if (t->key == "input.0") gradient = t;
  const JudgedTensor& summed = gradient ? *gradient : *in.front();
  const double reduced = summed.numel / output.numel;
  if (Additive(op) && !Contraction(op)) {
    // Same-sized addends (add, sub): the largest of them; a reduction: its input, T terms each.
    double term = 0;
    for (const auto* t : in)
      if (t->numel == in.front()->numel) term = std::max(term, t->rms);
    a = std::max(a, std::sqrt(std::max(1.0, reduced)) * term / output.rms);
  } else if ((Backward(op) || Normalisation(op)) && reduced > 1) {
    // An output that sums the largest input: a bias gradient, a norm's saved mean. Not a product
    // of operands (mm, bmm, convolution: the pairs below): there the largest input is in other
    // units than the output (a weight of 0.02 against a gradient of 1e-11).
    a = std::max(a, std::sqrt(reduced) * summed.rms / output.rms);
  }
  if (Contraction(op)) a = std::max(a, PairAmplification(in, gradient, output));
  // An input holding inf (a -inf attention mask) has no finite range to go by.
  if (input_error && Exponential(op) && std::isfinite(in.front()->max_magnitude))
    a = std::max(a, 1 + in.front()->max_magnitude);
  if (Normalisation(op)) a = std::max(a, NormalisationAmplification(tensors, *in.front()));
  return std::isfinite(a) ? a : INFINITY;
}

namespace {

/// An output's error may be blamed on its operator without replay when it exceeds what rounding
/// and the inputs' error allow by this factor (the allowance is an estimate from statistics).
constexpr double kBlameFactor = 32;
/// With exact inputs (bit-identical in both runs) the output's error is the operator's own: blamed
/// beyond this many roundings (amplified).
constexpr double kExactInputRoundings = 8;
/// With exact inputs, an output of which fewer elements than this share are within one rounding's
/// relative tolerance (msprobe's error-ratio drop of 0.1 from the exact inputs' 1) is the
/// operator's own error.
constexpr double kExactInputRatio = 0.9;
/// The share of a replay baseline's own error allowed on top of one rounding.
constexpr double kBaselineShare = 0.1;

std::string Times(double v) { return Brief(v) + "×"; }

/// x amplified by a (0 stays 0 however large a is).
double Amplified(double x, double a) { return x == 0 ? 0 : x * a; }

}  // namespace

void DivergenceFinder::Add(const CompareRow& r) {
  if (r.from_statistics) {
    if (r.replay) return;
    if (r.output) {
      if (!r.discrete && !r.negligible) stats_out_.Add(r, KeyOf(r));
    } else {
      stats_in_.Add(r, KeyOf(r));
    }
  }
  JudgedTensor t;
  t.key = KeyOf(r);
  t.output = r.output, t.replay = r.replay, t.baseline = t.key.rfind("replay.baseline.", 0) == 0;
  t.compared = r.compared, t.bad = r.verdict == Verdict::kNo, t.skip = r.discrete || r.negligible;
  t.nonfinite = r.message.rfind("inf or nan", 0) == 0;
  t.target = RowDType(r.target), t.reference = RowDType(r.reference);
  t.numel = static_cast<double>(r.elements);
  if (r.compared) {
    auto get = [&](const char* k) {
      auto it = r.metrics.find(k);
      return it == r.metrics.end() ? 0.0 : it->second;
    };
    t.rmse = get("RMSE"), t.max_abs_err = get("MaxAbsErr");
    // The share of elements within one rounding's relative tolerance: 1‰, or 5‰ for bf16/fp8.
    const bool coarse = t.target == DType::kBF16 || t.target == DType::kF8E4M3 || t.target == DType::kF8E5M2;
    t.ratio = get(coarse ? "Five Thousandths Err Ratio" : "One Thousandth Err Ratio");
    if (r.reference.stats && t.numel > 0) {
      t.rms = r.reference.stats->norm / std::sqrt(t.numel);
      t.mean = r.reference.stats->mean;
      t.max_magnitude = MaxMagnitude(*r.reference.stats);
    }
  }
  tensors_.push_back(std::move(t));
}

// The replayed outputs decide for an operator that has them: its own error, beyond what the
// quantisation of its inputs alone costs (the baseline), against one rounding of its type.
bool DivergenceFinder::JudgeReplay(long index) {
  bool replayed = false;
  // The inputs' quantisation when there is no baseline: the live inputs' rounding. `coarse`: the
  // coarsest live floating input type, and the largest input.
  double quantisation = 0, coarse = 0, largest = 0;
  for (const auto& t : tensors_) {
    if (t.output || t.replay) continue;
    if (t.target != t.reference) quantisation = std::max(quantisation, UnitRoundoff(t.target));
    if (IsFloating(t.target)) coarse = std::max(coarse, UnitRoundoff(t.target)), largest = std::max(largest, t.numel);
  }
  for (const auto& t : tensors_) {
    if (!t.replay || t.baseline || !(t.compared || t.bad)) continue;
    replayed = true;
    const std::string suffix = t.key.substr(7);  // output.N
    const JudgedTensor* base = nullptr;
    for (const auto& b : tensors_)
      if (b.baseline && b.compared && b.key.substr(16) == suffix) base = &b;
    const double amp = Amplification(op_name_, tensors_, t, false);
    const double carried = Amplification(op_name_, tensors_, t, true);
    double own = t.Relative();
    if (base && std::isfinite(own) && t.rms > 0)
      own = std::sqrt(std::max(0.0, t.rmse * t.rmse - base->rmse * base->rmse)) / t.rms;
    // The difference of squares is a statistical estimate: its noise grows with the baseline's
    // error, a tenth of which is allowed on top.
    // A reduction of inputs of a coarser type than its output (the fp32 bias gradient of a layer
    // norm fed bf16) may accumulate in that type: a running sum of T terms rounded at every step
    // is off by about u·√T of its result (u·√(T/6) for random terms), amplified.
    const double accumulation = t.numel < largest && coarse > UnitRoundoff(t.target)
                                    ? Amplified(coarse * std::sqrt(largest / t.numel), amp)
                                    : 0;
    const double allowed = 2 * Rounding(t.target, t.rms) + accumulation +
                           Amplified(kExactInputRoundings * Rounding(t.reference, t.rms), amp) +
                           (base ? kBaselineShare * base->Relative() : Amplified(2 * quantisation, carried));
    // An output holding inf (a masked score) has no finite scale: judged by its inf/nan only.
    const bool bad = t.nonfinite || (t.compared && !t.skip && t.rms > 0 && std::isfinite(t.rms) && !(own <= allowed)) ||
                     (t.bad && !t.compared);
    if (!bad) continue;
    d_.first_local = index, d_.basis = "replay";
    d_.evidence = t.key + " (computed from the reference's inputs) differs" +
                  (t.nonfinite ? std::string(": inf or nan")
                               : ": relative error " + Brief(own) +
                                     (base ? " beyond its baseline's " + Brief(base->Relative()) : "") + ", allowed " +
                                     Brief(allowed));
    return true;
  }
  return replayed;
}

DivergenceFinder::OpSummary DivergenceFinder::Summarise() const {
  OpSummary o;
  for (const auto& t : tensors_) {
    if (t.replay) continue;
    if (t.output) {
      if (!t.skip && t.bad && !o.output_bad) o.output_bad = true, o.bad_key = t.key;
      o.output_nonfinite = o.output_nonfinite || (!t.skip && t.nonfinite);
      continue;
    }
    o.inputs_seen = true, o.inputs_ok = o.inputs_ok && !t.bad;
    o.inputs_exact = o.inputs_exact && !t.bad && (!t.compared || t.max_abs_err == 0);
    if (t.compared && IsFloating(t.target)) o.in_rel = std::max(o.in_rel, t.Relative());
    // Other indices or counts: the output's error is not a growth of a relative input error.
    if (t.bad && !IsFloating(t.target) && t.target != DType::kUnknown) o.discrete_input_bad = true;
  }
  // The worst output against its allowance; with exact inputs, against the operator's own
  // rounding only, and the share of its elements within one rounding.
  for (const auto& t : tensors_) {
    if (!t.output || t.replay || t.skip || t.nonfinite || !t.compared || !IsFloating(t.target) ||
        !std::isfinite(t.rms))  // an output holding inf (a masked score) has no finite scale
      continue;
    const double rounding = Rounding(t.target, t.rms) + Rounding(t.reference, t.rms);
    const double allowed = Amplified(rounding + o.in_rel, Amplification(op_name_, tensors_, t, !o.inputs_exact));
    const double rel = t.Relative();
    if (std::isnan(rel)) continue;
    const double x = std::isinf(allowed) ? 0 : allowed > 0 ? rel / allowed : (rel > 0 ? INFINITY : 0);
    if (x > o.excess || o.worst_key.empty())
      o.excess = x, o.worst_rel = rel, o.worst_allowed = allowed, o.worst_key = t.key;
    if (t.ratio < o.worst_ratio) o.worst_ratio = t.ratio, o.ratio_key = t.key;
    // A `No` whose relative error is within what rounding allows (the tensor rule's absolute
    // error above 1 on a mask of ±3.4e38 that differs by one ulp) is not the operator's own error.
    if (t.key == o.bad_key && x <= 1) o.bad_within_rounding = true;
  }
  return o;
}

std::string DivergenceFinder::OpSummary::Evidence(const char* what) const {
  return worst_key + " relative error " + Brief(worst_rel) + ", " + Times(excess) + " what " + what + " allow (" +
         Brief(worst_allowed) + "); inputs " + Brief(in_rel);
}

// Inputs identical to the reference's: the output's error is the operator's own.
bool DivergenceFinder::JudgeExactInputs(long index, const OpSummary& o) {
  const bool bad = o.output_bad && !o.bad_within_rounding;
  if (!o.inputs_seen || !o.inputs_exact || o.worst_key.empty() ||
      !(bad || o.excess > kExactInputRoundings || o.worst_ratio < kExactInputRatio))
    return false;
  d_.first_local = index, d_.basis = "inputs matched";
  d_.evidence = bad                               ? o.bad_key + " is No, every input identical"
                : o.excess > kExactInputRoundings ? o.Evidence("rounding and exact inputs")
                                                  : o.ratio_key + " error ratio " + Brief(o.worst_ratio) +
                                                        " (share of elements within one rounding's relative "
                                                        "tolerance), every input identical";
  return true;
}

// The rows of one target operator are consecutive, in the target's execution order (RunCompare
// builds them so): each operator is judged when its rows end, nothing kept for the others.
void DivergenceFinder::Judge(long index) {
  Divergence& d = d_;
  const OpSummary o = Summarise();
  if (o.output_bad && d.first_mismatch < 0) d.first_mismatch = index;
  if (d.first_local >= 0) return;
  if (JudgeReplay(index)) return;
  if (o.inputs_seen && o.inputs_ok && o.output_nonfinite) {  // an inf or nan of its own
    d.first_local = index, d.basis = "inputs matched", d.evidence = o.bad_key + " is No, every input Yes";
  } else if (JudgeExactInputs(index, o)) {
  } else if (o.inputs_seen && o.inputs_ok && o.output_bad && o.worst_key.empty()) {
    d.first_local = index, d.basis = "inputs matched", d.evidence = o.bad_key + " is No, every input Yes";
  } else if (o.inputs_seen && !o.worst_key.empty() && o.excess > kBlameFactor && !o.discrete_input_bad) {
    d.first_local = index, d.basis = "error growth", d.evidence = o.Evidence("rounding and its inputs' error");
  } else if (stats_in_.stats && stats_out_.stats && stats_out_.stats_rel > kStatsRelTolerance &&
             stats_in_.stats_rel < 0.01) {
    d.first_local = index, d.basis = "statistics growth";
    d.evidence = stats_out_.stats_key + " statistics differ by " + Brief(stats_out_.stats_rel) +
                 " (relative), inputs by " + Brief(stats_in_.stats_rel) + " (" + stats_in_.stats_key + ")";
  } else if (o.output_bad && !o.inputs_seen) {
    d.first_local = index, d.basis = "outputs only", d.evidence = o.bad_key + " is No (no inputs dumped)";
  } else if (d.drift_start < 0 && !o.worst_key.empty() && o.excess > 1) {
    d.drift_start = index, d.drift_evidence = o.Evidence("rounding and its inputs' error");
  }
}

void DivergenceFinder::Feed(const std::vector<CompareRow>& rows) {
  for (const auto& r : rows) {
    if (done_) return;
    if (r.target_op < 0 || (r.verdict != Verdict::kYes && r.verdict != Verdict::kNo)) continue;
    if (r.target_op != current_) {
      if (current_ >= 0) Judge(current_);
      if (d_.first_local >= 0 && d_.first_mismatch >= 0) {
        done_ = true;
        return;
      }
      current_ = r.target_op;
      tensors_.clear(), stats_in_ = ErrorSummary(), stats_out_ = ErrorSummary();
      // `aten::native_layer_norm.forward.12.output.0` → native_layer_norm
      const std::string& n = r.target.name;
      std::string head = n.substr(0, n.find('.' + KeyOf(r)));
      for (int k = 0; k < 2; ++k) head = head.substr(0, head.rfind('.'));  // index, phase
      if (size_t c = head.rfind("::"); c != std::string::npos) head = head.substr(c + 2);
      if (size_t dot = head.find('.'); dot != std::string::npos) head = head.substr(0, dot);
      if (head.size() > 1 && head.back() == '_') head.pop_back();
      op_name_ = head;
    }
    Add(r);
  }
}

}  // namespace portkit::accuracy
