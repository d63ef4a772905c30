#pragma once
/// Writing a run's results: each file atomically, the `files | statistics` table, the log file,
/// report.json and report.sarif from the findings.
#include <filesystem>
#include <string>
#include <vector>

#include "analyse/custom_ops.h"
#include "analyse/finding.h"
#include "analyse/source_files.h"
#include "core/csv_writer.h"
#include "core/log.h"

namespace portkit::analyse {

class ReportWriter {
 public:
  ReportWriter(std::filesystem::path results, Logger& log) : results_(std::move(results)), log_(log) {}
  /// Writes `results/name`; counts `rows` for the summary table.
  void Write(const std::string& name, const std::string& content, size_t rows);
  void Write(const std::string& name, const CsvWriter& csv) { Write(name, csv.str(), csv.rows()); }
  /// Logs the closing lines, prints the table (with `extra` rows after the files) and writes the
  /// log file. Returns the exit code: 0, or 1 when a file could not be written.
  int Finish(const std::string& base, const std::vector<std::vector<std::string>>& extra);

 private:
  std::filesystem::path results_;
  Logger& log_;
  std::vector<std::vector<std::string>> table_;
  bool ok_ = true;
};

struct RunSummary {
  std::string mode, target, list_version;
  FileStats stats;
  const std::vector<FileProblem>* problems = nullptr;
  const CustomOpTable* custom_ops = nullptr;
};

std::string ReportJson(const std::vector<Finding>& findings, const RunSummary& run);

/// SARIF 2.1.0: one rule per (category, rule) pair, results with relative paths.
std::string ReportSarif(const std::vector<Finding>& findings, const std::string& tool_version,
                        const std::string& base);

}  // namespace portkit::analyse
