#pragma once
/// `prof export summary`: CSV/JSON summaries of an imported profile (docs/prof.md lists the
/// columns): op_summary, op_statistic, api_statistic, kernel_statistic, step_trace, and
/// host_op_summary (engine.cc, from the advisor's host-operator table).
#include <string>
#include <vector>

#include "core/status.h"
#include "prof/store.h"

namespace portkit::prof {

struct SummaryTable {
  std::string name;  ///< file stem ("op_statistic")
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  /// Per column: whether its cells are numbers (written as JSON numbers); empty: all text.
  std::vector<bool> numeric;
};

/// Builds every summary table of the traces in `store`.
Expected<std::vector<SummaryTable>> BuildSummaries(Store& store);

/// ns → "12.345" (µs with three decimals, exact).
std::string Micros(int64_t ns);

}  // namespace portkit::prof
