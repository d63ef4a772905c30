#pragma once
/// The files of `portkit analyse`, rendered from an AnalyseReport: the mode's CSV files,
/// report.json, report.sarif, the `files | statistics` table and the run log
/// pytorch_analysis.txt. Every file is written atomically into the report's results folder.
#include <string>
#include <string_view>
#include <vector>

#include "analyse/api.h"
#include "core/log.h"
#include "core/status.h"

namespace portkit::render {

/// One rendered report file: its name in the results folder, its content, and the rows the
/// summary table shows for it.
struct RenderedFile {
  std::string name;
  std::string content;
  size_t rows = 0;
};

/// The CSV files of the report's mode (AnalyseModeInfo::csv); none for dynamic_shape.
std::vector<RenderedFile> AnalyseCsvFiles(const analyse::AnalyseReport& report);
/// report.json: the run (mode, target, list version), file counts, problems, custom ops, findings;
/// for dynamic_shape also the instrumented copy.
std::string AnalyseJson(const analyse::AnalyseReport& report);
/// report.sarif, SARIF 2.1.0 as GitHub code scanning takes it: one rule per analyser rule (its
/// name is the ID) with descriptions and help from the rule's doc; every result has a location,
/// a URI relative to the analysed folder (uriBaseId SRCROOT) and UTF-16 columns (`columnKind`),
/// read from the files under report.input; project-level advice (no file) is listed as
/// notifications of the run's invocation instead of results.
std::string AnalyseSarif(const analyse::AnalyseReport& report, std::string_view tool_version);

/// The `files | statistics` table: `written` files (sorted) and their rows, then the run's counts.
std::string AnalyseSummaryTable(const analyse::AnalyseReport& report, std::vector<RenderedFile> written);

/// Writes the files of `formats` ("csv", "json", "sarif"), logs the closing lines, and writes
/// pytorch_analysis.txt (the log so far and the table). Returns the table for the console. Every
/// file is attempted; the first write error is returned.
Expected<std::string> WriteAnalyseReports(const analyse::AnalyseReport& report, const std::vector<std::string>& formats,
                                          Logger& log);

}  // namespace portkit::render
