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

}  // namespace portkit::prof
