#pragma once
/// Result files of a session: the seed's `aoe_result_opat_<timestamp>_pid<pid>.json` and
/// `tuned_plan.json` (the strategy each operator runs with).
#include <string>

#include "tune/session.h"

namespace portkit::tune {

struct ModelTotals {
  double baseline_ms = 0;  ///< sum over tuned operators of count x default time
  double result_ms = 0;    ///< sum over tuned operators of count x chosen time
  /// (baseline - result) / baseline, as a percentage.
  double improvement_percent() const { return baseline_ms > 0 ? (baseline_ms - result_ms) / baseline_ms * 100 : 0; }
};
ModelTotals Totals(const SessionResult& r);

/// "12.34%".
std::string Percent(double p);

/// The result file's JSON (FORMATS.md §4 fields plus per-operator details).
std::string ResultJson(const SessionResult& r);
/// tuned_plan.json: per operator its signature, chosen configuration, source and time.
std::string PlanJson(const SessionResult& r);
/// `aoe_result_opat_<YYYYmmddHHMMSS>_pid<pid>.json` for a local time.
std::string ResultFileName(std::chrono::system_clock::time_point t, long pid);

}  // namespace portkit::tune
