#pragma once
/// Renderers of `prof export summary` and `prof import` reports.
#include <string>

#include "prof/api.h"

namespace portkit::render {

/// One summary table as CSV (header, then rows; cells guarded against formula injection).
std::string ProfSummaryCsv(const prof::SummaryTable& table);
/// One summary table as a JSON array of objects keyed by the column names (values as text).
std::string ProfSummaryJson(const prof::SummaryTable& table);

/// The `trace | format | events | not stored | status` table of an import.
std::string ProfImportTable(const prof::ImportReport& report);

}  // namespace portkit::render
