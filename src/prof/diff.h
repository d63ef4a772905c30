#pragma once
/// `prof diff`: a base profile against a compared one (before/after an optimisation): step time,
/// and per-operator / per-kernel time deltas matched by name (and input shapes when recorded).
#include <string>
#include <vector>

#include "core/status.h"
#include "prof/store.h"

namespace portkit::prof {

struct Totals {
  double step_ms = 0;   ///< mean ProfilerStep time, or the whole span when no step is marked
  size_t steps = 0;
  size_t warmup_steps = 0;  ///< ProfilerStep#0 of traces with later steps: left out of step_ms
  double warmup_ms = 0;     ///< their total time
  std::vector<std::pair<std::string, int64_t>> ops;      ///< key → total ns (CPU ops)
  std::vector<std::pair<std::string, int64_t>> kernels;  ///< name → total ns (device tasks)
};

Expected<Totals> ComputeTotals(Store& store);

struct DeltaRow {
  std::string key;
  int64_t base_ns = 0, cmp_ns = 0;
};

/// Rows for every key in either side, sorted by |delta| descending, then key.
std::vector<DeltaRow> Deltas(const std::vector<std::pair<std::string, int64_t>>& base,
                             const std::vector<std::pair<std::string, int64_t>>& cmp);

}  // namespace portkit::prof
