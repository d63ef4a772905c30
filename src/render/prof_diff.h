#pragma once
/// Renderers of `prof diff`: the console text (step time, top deltas), the per-operator and
/// per-kernel CSVs, and JSON.
#include <string>

#include "prof/api.h"

namespace portkit::render {

/// "significant", "interval", "point": as `--gate` spells them.
const char* GateName(prof::DiffGate gate);
/// "pass", "regressed", "inconclusive" ("not asked" without --fail-above).
const char* VerdictName(prof::Verdict verdict);

/// "\nstep time: A ms (N steps) -> B ms (M steps): +x.xx%\n", the median step change with its
/// interval, the step work change with its interval, the gate's verdict and reason, then the ten largest operator and
/// kernel deltas as tables (with each one's interval).
std::string ProfDiffText(const prof::DiffReport& report);
/// `Name,Base Time(ms),Compare Time(ms),Delta(ms),Delta(%)`, then the per-step columns
/// `Base Step Median(ms),Compare Step Median(ms),Step Change(%),Step Change Low(%),Step Change High(%)`
/// (the last three empty without an interval) for `rows`.
std::string ProfDiffCsv(const std::vector<prof::DeltaRow>& rows);
/// `{"base": {folder, step_ms, steps, warmup_steps, warmup_ms, runs, step_median_ms, work_ms},
/// "compare": {...}, "step_change_percent", "step_change": {percent, low, high} | null, "confidence",
/// "resamples", "work_change": {percent, low, high} | null, "min_steps", "gate", "gate_statistic"
/// (step_work|step_median), "fail_above" | null, "verdict" (not_asked|pass|regressed|inconclusive), "verdict_reason",
/// "regressed", "operators": [{name, base_ns, compare_ns, delta_ns, base_step_median_ns, compare_step_median_ns,
/// step_change}], "kernels": [...]}`.
std::string ProfDiffJson(const prof::DiffReport& report);

}  // namespace portkit::render
