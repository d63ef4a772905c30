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

/// How the operators of a run ended up in the bank (AOE's repo_summary, seed 004's counting).
/// Counts overlap: `hit` is every operator found in the bank; under REPEAT_TUNE each hit is
/// re-tuned and ends as `update` or `reserved`, so hit = reserved + update when every hit was
/// re-tuned. An operator not found ends as `add` or `unsatisfied`. total = add + hit +
/// unsatisfied: every tuned-or-found operator once (the seed's example: add 2, hit 17 =
/// reserved 15 + update 2, total 19).
struct RepoAccounting {
  int add = 0, hit = 0, update = 0, reserved = 0, unsatisfied = 0;
  int untuned = 0;  ///< operators not tuned (unsupported, too large, not in a replayed landscape)
  int total() const { return add + hit + unsatisfied; }
};
RepoAccounting Accounting(const SessionResult& r);

/// "12.34%".
std::string Percent(double p);

}  // namespace portkit::tune
