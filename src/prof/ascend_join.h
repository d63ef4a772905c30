#pragma once
/// One Ascend profile from its two files: torch_npu writes the same device tasks twice into an
/// `ASCEND_PROFILER_OUTPUT/` folder, as "Ascend Hardware" events in `trace_view.json` and as rows
/// of `kernel_details.csv` (with block dims, shapes and data types). Imported side by side they
/// would be counted twice; JoinAscendSiblings joins each kernel_details row to its trace_view task
/// (same stream, start within 1 µs), adds the row's block dim, shapes and types to that task and
/// drops the duplicate, so the tasks sit once on trace_view's timeline and in its steps. Rows
/// without a match stay in the kernel_details trace, and its warning says how many were joined.
#include <string>
#include <vector>

#include "core/status.h"
#include "prof/store.h"

namespace portkit::prof {

struct AscendJoin {
  std::string trace_view, kernel_details;  ///< trace paths (relative to the profile folder)
  int64_t rows = 0, joined = 0;            ///< kernel_details rows, of which joined to a task
};

/// Joins every kernel_details trace to the trace_view trace in the same folder (`traces`: the
/// imported (path, importer name) pairs). One transaction per pair.
Expected<std::vector<AscendJoin>> JoinAscendSiblings(Store& store,
                                                     const std::vector<std::pair<std::string, std::string>>& traces);

}  // namespace portkit::prof
