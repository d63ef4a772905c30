#pragma once
/// Model-level figures of a session (the renderers of its result files are in
/// src/render/tune_render.h).
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

}  // namespace portkit::tune
