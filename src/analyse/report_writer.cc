#include "analyse/report_writer.h"

#include <algorithm>
#include <map>

#include "core/atomic_file.h"
#include "core/json_writer.h"
#include "core/table.h"

namespace portkit::analyse {

void ReportWriter::Write(const std::string& name, const std::string& content, size_t rows) {
  Status st = WriteFileAtomic(results_ / name, content);
  if (!st.ok()) {
    log_.Error(st.message());
    ok_ = false;
    return;
  }
  table_.push_back({name, std::to_string(rows)});
}

int ReportWriter::Finish(const std::string& base, const std::vector<std::vector<std::string>>& extra) {
  std::sort(table_.begin(), table_.end());
  log_.Info(Progress::Percent(1, 1) + "Analyse run success, welcome to the next use.");
  log_.Info("The detailed transplant result files are in the output path you defined, the relative path is " +
            base + "_analysis.");
  auto rows = table_;
  rows.insert(rows.end(), extra.begin(), extra.end());
  std::string rendered = RenderTable({"files", "statistics"}, rows);
  std::fwrite(rendered.data(), 1, rendered.size(), stdout);
  std::fflush(stdout);
  Status st = WriteFileAtomic(results_ / "pytorch_analysis.txt", log_.Contents() + rendered);
  if (!st.ok()) {
    log_.Error(st.message());
    ok_ = false;
  }
  return ok_ ? 0 : 1;
}

std::string ReportJson(const std::vector<Finding>& findings, const RunSummary& run) {
  JsonWriter j;
  j.BeginObject();
  j.Key("tool").String("portkit analyse");
  j.Key("mode").String(run.mode);
  j.Key("target").String(run.target);
  j.Key("torch_list_version").String(run.list_version);
  j.Key("files").BeginObject();
  j.Key("python_analysed").Int(static_cast<int64_t>(run.stats.python_analysed));
  j.Key("cpp_scanned").Int(static_cast<int64_t>(run.stats.cpp_scanned));
  j.Key("syntax_errors").Int(static_cast<int64_t>(run.stats.syntax_errors));
  j.Key("skipped").Int(static_cast<int64_t>(run.stats.skipped));
  j.EndObject();
  j.Key("problems").BeginArray();
  if (run.problems) {
    for (const auto& p : *run.problems) {
      j.BeginObject();
      j.Key("file").String(p.file);
      j.Key("line").Int(p.line);
      j.Key("column").Int(p.col);
      j.Key("kind").String(p.kind);
      j.Key("message").String(p.message);
      j.EndObject();
    }
  }
  j.EndArray();
  j.Key("custom_ops").BeginArray();
  if (run.custom_ops) {
    for (const auto& op : run.custom_ops->ops) {
      j.BeginObject();
      j.Key("name").String(op.name);
      if (!op.ns.empty()) j.Key("namespace").String(op.ns);
      j.Key("arg_count").Int(op.arg_count);
      j.Key("file").String(op.file);
      j.Key("line").Int(op.line);
      j.Key("registered_by").String(op.how);
      j.EndObject();
    }
  }
  j.EndArray();
  j.Key("findings").BeginArray();
  for (const auto& f : findings) {
    j.BeginObject();
    j.Key("file").String(f.file);
    if (f.file != "NA") {
      j.Key("start_line").Int(f.start_line);
      j.Key("end_line").Int(f.end_line);
      j.Key("start_column").Int(f.start_col);
      j.Key("end_column").Int(f.end_col);
    }
    j.Key("name").String(f.op);
    j.Key("category").String(CategoryName(f.category));
    if (!f.api_type.empty()) j.Key("api_type").String(f.api_type);
    j.Key("tip").String(f.tip);
    j.Key("confidence").String(ConfidenceName(f.confidence));
    j.Key("rule").String(f.rule);
    if (!f.function.empty()) j.Key("function").String(f.function);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.str();
}

std::string ReportSarif(const std::vector<Finding>& findings, const std::string& tool_version,
                        const std::string& base) {
  // One SARIF rule per finding kind: "<category>/<rule>".
  std::map<std::string, size_t> rule_index;
  for (const auto& f : findings) rule_index.emplace(std::string(CategoryName(f.category)) + "/" + f.rule, 0);
  size_t i = 0;
  for (auto& [id, idx] : rule_index) idx = i++;
  JsonWriter j;
  j.BeginObject();
  j.Key("$schema").String("https://json.schemastore.org/sarif-2.1.0.json");
  j.Key("version").String("2.1.0");
  j.Key("runs").BeginArray().BeginObject();
  j.Key("tool").BeginObject().Key("driver").BeginObject();
  j.Key("name").String("portkit");
  j.Key("version").String(tool_version);
  j.Key("rules").BeginArray();
  for (const auto& [id, idx] : rule_index) {
    j.BeginObject().Key("id").String(id).Key("shortDescription").BeginObject().Key("text").String(id).EndObject().EndObject();
  }
  j.EndArray().EndObject().EndObject();
  j.Key("originalUriBaseIds").BeginObject().Key("SRCROOT").BeginObject()
      .Key("description").BeginObject().Key("text").String("the parent folder of " + base).EndObject()
      .EndObject().EndObject();
  j.Key("results").BeginArray();
  for (const auto& f : findings) {
    std::string id = std::string(CategoryName(f.category)) + "/" + f.rule;
    const char* level = f.category == Category::kUnsupported ? "error"
                        : (f.category == Category::kUnknown || f.category == Category::kCuda) ? "warning"
                                                                                               : "note";
    j.BeginObject();
    j.Key("ruleId").String(id);
    j.Key("ruleIndex").Int(static_cast<int64_t>(rule_index[id]));
    j.Key("level").String(level);
    j.Key("message").BeginObject().Key("text").String(f.op + ": " + f.tip).EndObject();
    if (f.file != "NA") {
      j.Key("locations").BeginArray().BeginObject().Key("physicalLocation").BeginObject();
      j.Key("artifactLocation").BeginObject().Key("uri").String(f.file).Key("uriBaseId").String("SRCROOT").EndObject();
      j.Key("region").BeginObject().Key("startLine").Int(f.start_line).Key("endLine").Int(f.end_line);
      if (f.start_col) j.Key("startColumn").Int(f.start_col).Key("endColumn").Int(f.end_col);
      j.EndObject().EndObject().EndObject().EndArray();
    }
    j.EndObject();
  }
  j.EndArray();
  j.EndObject().EndArray();
  j.EndObject();
  return j.str();
}

}  // namespace portkit::analyse
