#pragma once
/// How well a strategy's search does on recorded landscapes (replay, no compiling): for each
/// operator of a landscape, the strategy is run from the recording's default under a budget with
/// many seeds, exactly as `portkit tune --replay LANDSCAPE --seed S` searches (the same space,
/// --fix set, default and per-operator seed), and the best it finds is compared with the
/// landscape's optimum. Used by the search-quality test (tests/unit/tune) and tune_bench.
#include <string>
#include <vector>

#include "core/status.h"
#include "tune/landscape.h"
#include "tune/tuner.h"

namespace portkit::tune {

struct SearchQuality {
  std::string op;                ///< "name (type)"
  size_t configs = 0;            ///< recorded configurations (the replayed space)
  size_t near_optimum = 0;       ///< of them within `margin` of the optimum
  double optimum_us = 0;         ///< the landscape's best valid time
  std::vector<double> ratio;     ///< per seed: best found / optimum (>= 1), seeds in order
  std::vector<int> evaluations;  ///< per seed: candidates evaluated
  /// Share of seeds whose best is within `margin` of the optimum.
  double HitRate(double margin = 0.05) const;
  /// The p-th percentile (0..100) of `ratio` (nearest rank).
  double Percentile(double p) const;
};

/// Runs `strategy` (with `options`) on every operator of `landscape` for seeds 0 .. seeds-1
/// (each mixed with the operator's signature as the session does) under `budget`.
Expected<std::vector<SearchQuality>> ReplaySearchQuality(const Landscape& landscape, const std::string& strategy,
                                                         const std::vector<std::string>& options, const Budget& budget,
                                                         int seeds, double margin = 0.05);

}  // namespace portkit::tune
