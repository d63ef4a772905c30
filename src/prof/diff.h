#pragma once
/// `prof diff`: a base profile against a compared one (before/after an optimisation): step time,
/// and per-operator / per-kernel time deltas matched by name (and input shapes when recorded).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "prof/diff_stats.h"
#include "prof/store.h"

namespace portkit::prof {

struct Totals {
  double step_ms = 0;  ///< mean ProfilerStep time, or the whole span when no step is marked
  size_t steps = 0;
  size_t warmup_steps = 0;                           ///< ProfilerStep#0 of traces with later steps: left out of step_ms
  double warmup_ms = 0;                              ///< their total time
  std::vector<std::pair<std::string, int64_t>> ops;  ///< key → total ns (CPU ops)
  std::vector<std::pair<std::string, int64_t>> kernels;  ///< name → total ns (device tasks)
};

Expected<Totals> ComputeTotals(Store& store);

/// Every measured step of one run (the steps ComputeTotals averages; the whole span as one step
/// when none is marked) with what each operator and kernel took in it.
struct StepSeries {
  std::vector<double> step_ns;  ///< per step: its span, trace by trace, in start order
  /// key (as in Totals) → total ns in each step, aligned with step_ns. A CPU op belongs to the
  /// step its start falls in; a device task to the step its launch (else its start) falls in.
  std::map<std::string, std::vector<double>> ops, kernels;
  /// The positions of the steps (docs/prof.md, "Noise-aware gate"), aligned with step_ns: each
  /// top-level CPU op of the step's thread, keyed by its name and how many ops of that name came
  /// before it in the step ("aten::conv2d#3"), holds the time from its start to the next top-level
  /// op's start (or the step's end); "(step start)" holds the time before the first. A step's
  /// positions add up to its span; a step without a position counts 0 there. Empty when no step is
  /// marked.
  std::map<std::string, std::vector<double>> positions;
};

Expected<StepSeries> ComputeStepSeries(Store& store);

struct DeltaRow {
  std::string key;
  int64_t base_ns = 0, cmp_ns = 0;           ///< total per run (the mean over runs when several)
  double base_step_ns = 0, cmp_step_ns = 0;  ///< median per step over all runs of the side
  std::optional<ChangeInterval> change;      ///< of the per-step median; nullopt: < 2 steps a side
};

/// Rows for every key in either side, sorted by |delta| descending, then key.
std::vector<DeltaRow> Deltas(const std::vector<std::pair<std::string, int64_t>>& base,
                             const std::vector<std::pair<std::string, int64_t>>& cmp);

/// Sorts `rows` by |delta| descending, then key (Deltas' order).
void SortByDelta(std::vector<DeltaRow>* rows);

/// One side of a diff: the per-step series of each of its runs.
using SideSeries = std::vector<StepSeries>;

/// The per-step medians and intervals of `rows` (Deltas' output) from the steps of both sides;
/// `kernels` picks StepSeries::kernels over ::ops. A key a run lacks counts 0 in its steps.
void AddStepIntervals(std::vector<DeltaRow>* rows, bool kernels, const SideSeries& base, const Resamples& base_draws,
                      const SideSeries& compare, const Resamples& compare_draws, double confidence);

/// The positions of every step of `side`, run after run (WorkTime's input; a position a run
/// lacks counts 0 in its steps), in key order.
PositionTable FlatPositions(const SideSeries& side);

/// Every step of `side`, run after run, and each run's step count (DrawResamples' input).
std::vector<double> FlatSteps(const SideSeries& side);
RunSizes StepCounts(const SideSeries& side);

}  // namespace portkit::prof
