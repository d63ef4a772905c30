#include <system_error>

#include "core/atomic_file.h"
#include "core/table.h"
#include "render/compare_render.h"

namespace portkit::render {
using accuracy::CompareReport;

std::string CompareConsoleSummary(const CompareReport& report) {
  std::vector<std::vector<std::string>> table;
  for (const auto& [v, n] : report.verdict_counts) table.push_back({v, std::to_string(n)});
  return RenderTable({"Accuracy Reached or Not", "tensors"}, table);
}

Status WriteCompareFiles(const CompareReport& report, const std::filesystem::path& dir, const CompareFiles& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(dir.string() + ": cannot create: " + ec.message());
  if (files.csv) PORTKIT_RETURN_IF_ERROR(WriteFileAtomic(dir / "compare_result.csv", CompareCsv(report)));
  if (files.json) PORTKIT_RETURN_IF_ERROR(WriteFileAtomic(dir / "compare_result.json", CompareJson(report)));
  if (files.html) PORTKIT_RETURN_IF_ERROR(WriteFileAtomic(dir / "compare_report.html", CompareHtml(report)));
  return Status::Ok();
}

}  // namespace portkit::render
