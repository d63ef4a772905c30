#include "render/analyse_report.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/atomic_file.h"
#include "core/csv_writer.h"
#include "core/json_writer.h"
#include "core/table.h"

namespace portkit::render {
using namespace portkit::analyse;

namespace {

RenderedFile Csv(std::string name, const CsvWriter& csv) { return {std::move(name), csv.str(), csv.rows()}; }

std::string AdviceCsv(const std::vector<const Finding*>& rows) {
  CsvWriter w({"File", "Start Line", "End Line", "OP", "Tips"});
  for (const Finding* f : rows) {
    bool na = f->file == "NA";
    w.AddRow({f->file, na ? "NA" : std::to_string(f->start_line),
              na ? "NA" : std::to_string(f->end_line), f->op, f->tip});
  }
  return w.str();
}

CsvWriter CudaOpList(const std::vector<Finding>& findings) {
  std::set<std::pair<std::string, std::string>> rows;
  for (const auto& f : findings)
    if (f.category == Category::kCuda) rows.insert({f.file, f.op});
  CsvWriter cuda({"File", "Api"});
  for (const auto& [file, api] : rows) cuda.AddRow({file, api});
  return cuda;
}

/// The CSVs of -m third_party, from the affected functions.
std::vector<RenderedFile> LibraryImpactCsvs(const std::vector<AffectedFunction>& affected) {
  CsvWriter full({"File", "3rd-party API", "Message"});
  CsvWriter framework({"Torch API", "Affected 3rd-party API"});
  CsvWriter unknown({"Torch API", "Affected 3rd-party API"});
  CsvWriter migration({"Torch API", "Affected 3rd-party API"});
  CsvWriter cuda({"OP Name", "Affected 3rd-party API"});
  std::set<std::tuple<Bucket, std::string, std::string>> pairs;
  for (const auto& a : affected) {
    std::string message;
    for (const auto& o : a.offences) {
      if (!message.empty()) message += "\n";
      message += "file_path:" + o.file + ", start_line:" + std::to_string(o.line) + ", api_name:" + o.api;
    }
    if (a.path.size() > 1) {
      message += "\ncall path:";
      for (size_t i = 0; i < a.path.size(); ++i) message += (i ? " -> " : " ") + a.path[i];
    }
    for (const auto& s : a.spellings) {
      full.AddRow({a.file, s, message});
      for (const auto& [bucket, api] : a.apis) pairs.insert({bucket, api, s});
    }
  }
  for (const auto& [bucket, api, spelling] : pairs) {
    switch (bucket) {
      case Bucket::kFrameworkUnsupported: framework.AddRow({api, spelling}); break;
      case Bucket::kUnknown: unknown.AddRow({api, spelling}); break;
      case Bucket::kMigrationNeeded: migration.AddRow({api, spelling}); break;
      case Bucket::kCudaOp: cuda.AddRow({api, spelling}); break;
    }
  }
  std::vector<RenderedFile> out;
  out.push_back(Csv("full_unsupported_results.csv", full));
  out.push_back(Csv("framework_unsupported_op.csv", framework));
  out.push_back(Csv("unknown_op.csv", unknown));
  out.push_back(Csv("migration_needed_op.csv", migration));
  out.push_back(Csv("cuda_op.csv", cuda));
  return out;
}

}  // namespace

std::vector<RenderedFile> AnalyseCsvFiles(const AnalyseReport& report) {
  const std::vector<Finding>& findings = report.findings;
  std::vector<RenderedFile> out;
  switch (ModeInfo(report.mode).csv) {
    case CsvLayout::kApiFindings: {
      std::map<Category, std::vector<const Finding*>> by_cat;
      for (const auto& f : findings) by_cat[f.category].push_back(&f);
      const std::pair<const char*, Category> kFiles[] = {
          {"unsupported_api.csv", Category::kUnsupported}, {"unknown_api.csv", Category::kUnknown},
          {"api_precision_advice.csv", Category::kPrecision},
          {"api_performance_advice.csv", Category::kPerformance}};
      for (const auto& [name, cat] : kFiles) out.push_back({name, AdviceCsv(by_cat[cat]), by_cat[cat].size()});
      out.push_back(Csv("cuda_op_list.csv", CudaOpList(findings)));
      break;
    }
    case CsvLayout::kLibraryImpact:
      out = LibraryImpactCsvs(report.affected);
      out.push_back(Csv("cuda_op_list.csv", CudaOpList(findings)));
      break;
    case CsvLayout::kAffinityCalls: {
      CsvWriter w({"File", "Start Line", "End Line", "Api Type", "Api Call Name", "Affinity Api Name"});
      for (const auto& f : findings)
        if (f.category == Category::kAffinity)
          w.AddRow({f.file, std::to_string(f.start_line), std::to_string(f.end_line), f.api_type, f.op, f.tip});
      out.push_back(Csv("affinity_api_call.csv", w));
      break;
    }
    case CsvLayout::kNone:
      break;
  }
  return out;
}

std::string AnalyseJson(const AnalyseReport& run) {
  const std::vector<Finding>& findings = run.findings;
  JsonWriter j;
  j.BeginObject();
  j.Key("tool").String("portkit analyse");
  j.Key("mode").String(std::string(ModeInfo(run.mode).name));
  j.Key("target").String(run.target);
  j.Key("torch_list_version").String(run.list_version);
  j.Key("files").BeginObject();
  j.Key("python_analysed").Int(static_cast<int64_t>(run.files.python_analysed));
  j.Key("cpp_scanned").Int(static_cast<int64_t>(run.files.cpp_scanned));
  j.Key("syntax_errors").Int(static_cast<int64_t>(run.files.syntax_errors));
  j.Key("skipped").Int(static_cast<int64_t>(run.files.skipped));
  j.EndObject();
  j.Key("problems").BeginArray();
  {
    for (const auto& p : run.problems) {
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
  {
    for (const auto& op : run.custom_ops) {
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
  if (run.mode == AnalyseMode::kDynamicShape) {
    const InstrumentedCopy& copy = run.copy;
    j.Key("instrumented_copy").BeginObject();
    j.Key("folder").String(run.project + "_analysis");
    j.Key("files_copied").Int(static_cast<int64_t>(copy.files_copied));
    j.Key("python_instrumented").Int(static_cast<int64_t>(copy.python_instrumented));
    j.Key("entry").String(copy.entry);
    j.Key("wrapped_loops").BeginArray();
    for (const auto& l : copy.loops) {
      j.BeginObject();
      j.Key("file").String(l.file);
      j.Key("line").Int(l.line);
      j.Key("iterable").String(l.iterable);
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
  }
  j.EndObject();
  return j.str();
}

std::string AnalyseSarif(const AnalyseReport& report, std::string_view tool_version) {
  const std::vector<Finding>& findings = report.findings;
  const std::string& base = report.project;
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
  j.Key("version").String(std::string(tool_version));
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

std::string AnalyseSummaryTable(const AnalyseReport& report, std::vector<RenderedFile> written) {
  std::vector<std::vector<std::string>> rows;
  std::sort(written.begin(), written.end(),
            [](const RenderedFile& a, const RenderedFile& b) { return a.name < b.name; });
  for (const auto& f : written) rows.push_back({f.name, std::to_string(f.rows)});
  const FileStats& stats = report.files;
  if (report.mode == AnalyseMode::kDynamicShape) {
    rows.push_back({"(files copied)", std::to_string(report.copy.files_copied)});
    rows.push_back({"(python files instrumented)", std::to_string(report.copy.python_instrumented)});
    rows.push_back({"(data loops wrapped)", std::to_string(report.copy.loops.size())});
    rows.push_back({"(files with syntax errors)", std::to_string(stats.syntax_errors)});
  } else {
    rows.push_back({"(python files analysed)", std::to_string(stats.python_analysed)});
    rows.push_back({"(files with syntax errors)", std::to_string(stats.syntax_errors)});
    rows.push_back({"(files skipped)", std::to_string(stats.skipped)});
  }
  return RenderTable({"files", "statistics"}, rows);
}

Expected<std::string> WriteAnalyseReports(const AnalyseReport& report, const std::vector<std::string>& formats,
                                          Logger& log) {
  auto wants = [&](std::string_view f) { return std::find(formats.begin(), formats.end(), f) != formats.end(); };
  std::vector<RenderedFile> files;
  if (wants("csv")) files = AnalyseCsvFiles(report);
  if (wants("json")) files.push_back({"report.json", AnalyseJson(report), report.findings.size()});
  if (wants("sarif")) files.push_back({"report.sarif", AnalyseSarif(report, PORTKIT_VERSION_STRING), report.findings.size()});
  Status first_error;
  std::vector<RenderedFile> written;
  for (auto& f : files) {
    Status st = WriteFileAtomic(report.results_dir / f.name, f.content);
    if (!st.ok()) {
      log.Error(st.message());
      if (first_error.ok()) first_error = st;
      continue;
    }
    f.content.clear();
    written.push_back(std::move(f));
  }
  log.Info(Progress::Percent(1, 1) + "Analyse run success, welcome to the next use.");
  log.Info("The detailed transplant result files are in the output path you defined, the relative path is " +
           report.project + "_analysis.");
  std::string table = AnalyseSummaryTable(report, std::move(written));
  Status st = WriteFileAtomic(report.results_dir / "pytorch_analysis.txt", log.Contents() + table);
  if (!st.ok()) {
    log.Error(st.message());
    if (first_error.ok()) first_error = st;
  }
  if (!first_error.ok()) return first_error;
  return table;
}

}  // namespace portkit::render
