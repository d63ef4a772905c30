// RunOverflow (api.h): the overflowing operators of one dump, and where the first inf/nan arises.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>

#include "accuracy/api.h"
#include "accuracy/dtype.h"
#include "accuracy/dump.h"

namespace portkit::accuracy {
namespace {

bool IsOutput(const DumpTensor& t) { return t.key.rfind("output", 0) == 0; }
bool IsInput(const DumpTensor& t) { return t.key.rfind("input", 0) == 0; }

/// Operators that create or fill tensors with given values (an inf there is a mask value, not an
/// overflow) or return uninitialised memory.
bool WritesValuesOnPurpose(std::string_view name) {
  if (auto colons = name.rfind("::"); colons != std::string_view::npos) name.remove_prefix(colons + 2);
  while (!name.empty() && name.back() == '_') name.remove_suffix(1);  // fill_ → fill
  if (name.rfind("_", 0) == 0) name.remove_prefix(1);                 // _to_copy stays a copy
  for (std::string_view prefix : {"empty", "new_empty", "full", "new_full", "fill", "masked_fill", "index_fill",
                                  "scalar_tensor", "lift_fresh", "where"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

/// Holds -inf and no other non-finite value (needs the dumper's nan/inf counts and statistics).
bool OnlyMinusInf(const DumpTensor& t) {
  return t.has_stats && t.nan == 0 && t.inf > 0 && t.min == -INFINITY && t.max != INFINITY;
}

/// A floating (or complex) element type, by the manifest's name.
bool FloatingName(const std::string& dtype) {
  DType t = ParseDType(dtype);
  return IsFloating(t) || dtype.rfind("complex", 0) == 0 || dtype.rfind("float", 0) == 0;
}

}  // namespace

bool OverflowReport::HasComputedOverflow() const {
  return std::any_of(overflowing.begin(), overflowing.end(),
                     [](const OverflowOp& op) { return !op.deliberate && !op.mask; });
}

Expected<OverflowReport> RunOverflow(const OverflowOptions& options, Context&) {
  // One pass over the dump, one operator at a time (a 300k-call dump.json is never held whole).
  // Which rule finds the origin depends on whether the dump holds any input at all, known only at
  // its end: the first operator each rule picks is kept, and the rule is chosen after the pass.
  OverflowReport report;
  report.dump = options.dump.string();
  bool any_inputs = false;
  std::optional<OverflowOp> origin_finite_inputs, origin_no_inputs;
  auto reader = DumpReader::Open(options.dump);
  if (!reader.ok()) return reader.status();
  for (DumpOp op;;) {
    auto more = reader->Next(op);
    if (!more.ok()) return more.status();
    if (!*more) break;
    ++report.operators;
    std::string reason = op.overflow ? "flagged by the dumper" : "";
    std::string nonfinite_key;
    // Whether every non-finite output holds -inf only; whether an input does (a mask carrier).
    bool outputs_minus_inf_only = true, input_mask = false;
    bool has_input = false, inputs_finite = true;
    for (const auto& t : op.tensors) {
      if (IsInput(t)) {
        has_input = true;
        if (OnlyMinusInf(t)) input_mask = true;
        if (FloatingName(t.dtype) && t.NonFinite()) inputs_finite = false;
      }
      if (!IsOutput(t)) continue;
      if (t.NonFinite()) {
        if (nonfinite_key.empty()) nonfinite_key = t.key;
        if (reason.empty()) reason = t.key + ": inf or nan";
        if (!OnlyMinusInf(t)) outputs_minus_inf_only = false;
      } else if (reason.empty() && t.has_stats && t.dtype == "F16" &&
                 std::max(std::fabs(t.max), std::fabs(t.min)) > 65504) {
        reason = t.key + ": beyond the fp16 range";
      }
    }
    any_inputs = any_inputs || has_input;
    if (reason.empty()) continue;
    OverflowOp entry{op.index, op.name, op.phase, op.module, op.stack, reason, WritesValuesOnPurpose(op.name)};
    entry.mask =
        !nonfinite_key.empty() && outputs_minus_inf_only && input_mask && reason.find("fp16") == std::string::npos;
    report.overflowing.push_back(entry);
    if (nonfinite_key.empty() || entry.deliberate) continue;
    // Without inputs a mask carrier cannot be told apart by its inputs; outputs whose only
    // non-finite value is -inf are taken for masks.
    if (!origin_no_inputs && !outputs_minus_inf_only) {
      origin_no_inputs = entry;
      origin_no_inputs->reason = nonfinite_key + ": inf or nan (inputs not dumped)";
    }
    if (!origin_finite_inputs && has_input && inputs_finite) {
      origin_finite_inputs = entry;
      origin_finite_inputs->reason = nonfinite_key + ": inf or nan while every floating input is finite";
    }
  }
  if (any_inputs && origin_finite_inputs) report.origin = origin_finite_inputs, report.origin_basis = "finite inputs";
  if (!any_inputs && origin_no_inputs) report.origin = origin_no_inputs, report.origin_basis = "inputs not dumped";
  if (!reader->warning().empty()) report.warnings.push_back(reader->warning());
  return report;
}

}  // namespace portkit::accuracy
