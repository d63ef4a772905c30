#include "render/prof_summary.h"

#include "core/csv_writer.h"
#include "core/json_writer.h"
#include "core/table.h"

namespace portkit::render {

std::string ProfSummaryCsv(const prof::SummaryTable& table) {
  CsvWriter w(table.header);
  for (const auto& r : table.rows) w.AddRow(r);
  return w.str();
}

std::string ProfSummaryJson(const prof::SummaryTable& table) {
  JsonWriter j;
  j.BeginArray();
  for (const auto& r : table.rows) {
    j.BeginObject();
    for (size_t i = 0; i < table.header.size(); ++i) {
      j.Key(table.header[i]);
      const std::string& v = r[i];
      if (i < table.numeric.size() && table.numeric[i] && !v.empty()) {
        size_t dot = v.find('.');
        if (dot == std::string::npos) j.Int(std::stoll(v));
        else j.Fixed(std::stod(v), static_cast<int>(v.size() - dot - 1));
      } else {
        j.String(v);
      }
    }
    j.EndObject();
  }
  j.EndArray();
  return j.str();
}

std::string ProfImportTable(const prof::ImportReport& report) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : report.traces) {
    if (!t.status.ok()) {
      rows.push_back({t.path, "-", "-", "-", "error"});
      continue;
    }
    rows.push_back({t.path, t.result.format, std::to_string(t.result.events), std::to_string(t.result.skipped),
                    t.result.truncated ? "truncated" : "ok"});
  }
  return RenderTable({"trace", "format", "events", "not stored", "status"}, rows);
}

}  // namespace portkit::render
