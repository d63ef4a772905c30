#pragma once
/// The statistics of `prof diff`'s noise-aware gate (docs/prof.md, "Noise-aware gate"): a
/// percentile bootstrap of the relative change in the median per-step value between two sides,
/// each side one or more runs of one or more steps. Runs are resampled first, then steps within
/// each drawn run (a two-level bootstrap), so the interval widens with run-to-run noise when
/// several runs are given. Deterministic: a fixed-seed mt19937_64, whose sequence the standard
/// fixes, and draws taken as `generator() % n`.
#include <cstdint>
#include <optional>
#include <vector>

namespace portkit::prof {

/// The steps of one side: for each run, how many steps it has (runs with none are skipped).
using RunSizes = std::vector<size_t>;

/// Index lists into a side's steps (flattened run after run): one list per resample.
struct Resamples {
  std::vector<std::vector<uint32_t>> draws;
  /// Per resample, the run drawn for each block of its index list, in order (an index among the
  /// runs with steps); with `lengths`, where each drawn run's block starts and ends.
  std::vector<std::vector<uint32_t>> runs;
  std::vector<size_t> lengths;  ///< steps of each run with steps
};

/// `count` two-level resamples of the steps of runs with `sizes` (with one run, plain step
/// resampling). The same `seed` gives the same draws everywhere.
Resamples DrawResamples(const RunSizes& sizes, int count, uint64_t seed);

/// The median of `values` (the mean of the two middle ones for an even count); 0 when empty.
double Median(std::vector<double> values);

/// The `q` quantile (0..1) of sorted `values`, linearly interpolated (R type 7).
double Quantile(const std::vector<double>& sorted_values, double q);

/// A relative change with its confidence interval, all in percent: 100 × (compare / base − 1).
struct ChangeInterval {
  double percent = 0;  ///< of the medians of all steps of each side
  double low = 0, high = 0;
};

/// The change of the median per-step value from `base` to `compare` (each flattened as its
/// resamples index it) with a `confidence` (e.g. 0.95) two-sided percentile-bootstrap interval.
/// nullopt when the base median is 0 or a side has fewer than 2 values; resamples whose base
/// median is 0 are left out.
std::optional<ChangeInterval> MedianChangeInterval(const std::vector<double>& base, const Resamples& base_draws,
                                                   const std::vector<double>& compare, const Resamples& compare_draws,
                                                   double confidence);

/// The per-position values of one side's steps (flattened run after run, as its resamples index
/// them): one row per position, one value per step (0 where the step lacks the position).
using PositionTable = std::vector<std::vector<double>>;

/// The step work time (docs/prof.md, "Noise-aware gate") of steps grouped in runs: for each run,
/// the sum over positions of the position's minimum over the run's steps; then the median over the
/// runs. `runs` lists each run's step indices (a run may be drawn twice); 0 without runs.
double WorkTime(const PositionTable& positions, const std::vector<std::vector<uint32_t>>& runs);

/// Each run's step indices in `sizes` (runs without steps left out): WorkTime's `runs` for the
/// steps as measured.
std::vector<std::vector<uint32_t>> AllSteps(const RunSizes& sizes);

/// The change of the step work time from `base` to `compare` with a `confidence` two-sided
/// percentile-bootstrap interval (runs, then steps, as the draws give them). nullopt when a side
/// has fewer than 2 steps or no positions, or the base work time is 0.
std::optional<ChangeInterval> WorkChangeInterval(const PositionTable& base, const RunSizes& base_sizes,
                                                 const Resamples& base_draws, const PositionTable& compare,
                                                 const RunSizes& compare_sizes, const Resamples& compare_draws,
                                                 double confidence);

/// What `prof diff --fail-above` decided.
enum class Verdict {
  kNotAsked,      ///< no --fail-above
  kPass,          ///< no slowdown beyond the limit
  kRegressed,     ///< a slowdown beyond the limit (exit 3)
  kInconclusive,  ///< too few steps, or an interval that holds both no change and one beyond the limit
};

/// The significance rule (the default `--gate significant`): regressed when the change is above
/// `limit` percent and its interval is all above 0; inconclusive when the interval holds both 0
/// and values above `limit`; else pass.
Verdict SignificantVerdict(const ChangeInterval& change, double limit);

}  // namespace portkit::prof
