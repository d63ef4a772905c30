#include "render/migrate_report.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/atomic_file.h"
#include "core/csv_writer.h"
#include "core/json_writer.h"
#include "core/table.h"

namespace portkit::render {
using namespace portkit::analyse;

std::string ChangeListCsv(const MigrateReport& report) {
  CsvWriter changes({"File", "Start Line", "End Line", "Operation Type", "Message"});
  for (const auto& c : report.changes)
    changes.AddRow({c.file, std::to_string(c.start_line), std::to_string(c.end_line), c.operation, c.message});
  return changes.str();
}

std::string ChangeListJson(const MigrateReport& report) {
  JsonWriter j;
  j.BeginObject();
  j.Key("tool").String("portkit migrate");
  j.Key("target").String(report.target);
  j.Key("unsafe").Bool(report.unsafe);
  j.Key("transfer_only").Bool(report.transfer_only);
  if (!report.list_version.empty()) j.Key("list_version").String(report.list_version);
  j.Key("copy").String(report.project + "_msft");
  j.Key("files").BeginObject();
  j.Key("changed").Int(static_cast<int64_t>(report.files_changed));
  j.Key("copied").Int(static_cast<int64_t>(report.files_copied));
  j.EndObject();
  j.Key("changes").BeginArray();
  for (const auto& c : report.changes) {
    j.BeginObject();
    j.Key("file").String(c.file);
    j.Key("start_line").Int(c.start_line);
    j.Key("end_line").Int(c.end_line);
    j.Key("operation").String(c.operation);
    j.Key("class").String(c.edit_class);
    j.Key("message").String(c.message);
    j.EndObject();
  }
  j.EndArray();
  j.Key("warnings").BeginArray();
  for (const auto& w : report.warnings) {
    j.BeginObject();
    j.Key("file").String(w.file);
    if (w.line) j.Key("line").Int(w.line).Key("column").Int(w.col);
    j.Key("kind").String(w.kind);
    j.Key("message").String(w.message);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.str();
}

std::string MigrateSummaryTable(const MigrateReport& report, const std::vector<std::string>& written) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& name : written) rows.push_back({name, std::to_string(report.changes.size())});
  rows.push_back({"(files changed)", std::to_string(report.files_changed)});
  rows.push_back({"(files copied)", std::to_string(report.files_copied)});
  return RenderTable({"files", "statistics"}, rows);
}

std::string MigrateDryRunTable(const MigrateReport& report) {
  std::map<std::string, std::pair<size_t, std::set<std::string>>> by_class;
  for (const auto& c : report.changes) {
    auto& [count, files] = by_class[c.edit_class.empty() ? "other" : c.edit_class];
    ++count;
    files.insert(c.file);
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, entry] : by_class)
    if (name != "review") rows.push_back({name, std::to_string(entry.first), std::to_string(entry.second.size())});
  if (auto it = by_class.find("review"); it != by_class.end())
    rows.push_back({"review (not made)", std::to_string(it->second.first), std::to_string(it->second.second.size())});
  rows.push_back({"(warnings)", std::to_string(report.warnings.size()), ""});
  std::string table = RenderTable({"class", "edits", "files"}, rows);
  for (const auto& c : report.changes)
    if (c.operation == "Review")
      table += "review: " + c.file + ":" + std::to_string(c.start_line) + ": " + c.message + "\n";
  return table;
}

Expected<std::string> WriteMigrateReports(const MigrateReport& report, const std::vector<std::string>& formats,
                                          Logger& log) {
  auto wants = [&](std::string_view f) { return std::find(formats.begin(), formats.end(), f) != formats.end(); };
  std::vector<std::pair<std::string, std::string>> files;
  if (wants("csv")) files.emplace_back("change_list.csv", ChangeListCsv(report));
  if (wants("json")) files.emplace_back("change_list.json", ChangeListJson(report));
  Status first_error;
  std::vector<std::string> written;
  for (const auto& [name, content] : files) {
    Status st = WriteFileAtomic(report.reports_dir / name, content);
    if (!st.ok()) {
      log.Error(st.message());
      if (first_error.ok()) first_error = st;
      continue;
    }
    written.push_back(name);
  }
  std::string table = MigrateSummaryTable(report, written);
  Status st = WriteFileAtomic(report.reports_dir / "migration_log.txt", log.Contents() + table);
  if (!st.ok()) {
    log.Error(st.message());
    if (first_error.ok()) first_error = st;
  }
  if (!first_error.ok()) return first_error;
  return table;
}

}  // namespace portkit::render
