#pragma once
/// Renderers of `prof diff`: the console text (step time, top deltas), the per-operator and
/// per-kernel CSVs, and JSON.
#include <string>

#include "prof/api.h"

namespace portkit::render {

/// "\nstep time: A ms (N steps) -> B ms (M steps): +x.xx%\n" then the ten largest operator and
/// kernel deltas as tables.
std::string ProfDiffText(const prof::DiffReport& report);
/// `Name,Base Time(ms),Compare Time(ms),Delta(ms),Delta(%)` for `rows`.
std::string ProfDiffCsv(const std::vector<prof::DeltaRow>& rows);
/// `{"base": {folder, step_ms, steps}, "compare": {...}, "step_change_percent", "regressed",
/// "operators": [{name, base_ns, compare_ns, delta_ns}], "kernels": [...]}`.
std::string ProfDiffJson(const prof::DiffReport& report);

}  // namespace portkit::render
