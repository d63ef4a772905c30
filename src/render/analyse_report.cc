#include "render/analyse_report.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "analyse/rule_docs.h"
#include "analyse/source_files.h"
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
    w.AddRow(
        {f->file, na ? "NA" : std::to_string(f->start_line), na ? "NA" : std::to_string(f->end_line), f->op, f->tip});
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
      // Unknown-only reach is not an offence of the library: it is listed in unknown_op.csv.
      if (a.real) full.AddRow({a.file, s, message});
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
      const std::pair<const char*, Category> kFiles[] = {{"unsupported_api.csv", Category::kUnsupported},
                                                         {"unknown_api.csv", Category::kUnknown},
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
    case CsvLayout::kNone: break;
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

namespace {

/// `path` as a relative URI reference: unreserved characters and '/' kept, every other byte
/// percent-encoded (spaces, non-ASCII and non-UTF-8 bytes alike).
std::string UriPath(std::string_view path) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

/// UTF-16 code units of the UTF-8 bytes `text` (a 4-byte sequence is 2 units; a stray or
/// invalid byte counts 1).
uint32_t Utf16Units(std::string_view text) {
  uint32_t units = 0;
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + len > text.size()) len = 1;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) len = 1;
    units += len == 4 ? 2 : 1;
    i += len;
  }
  return units;
}

/// The lines of the analysed files, read once each, to turn byte columns into UTF-16 columns.
class LineCache {
 public:
  LineCache(const std::filesystem::path& root, std::string project) : root_(root), prefix_(std::move(project) + "/") {}

  /// 1-based UTF-16 column of 1-based byte column `col` on line `line` of display path `file`;
  /// 0 when the file cannot be read or the position is not in it.
  uint32_t Column(const std::string& file, uint32_t line, uint32_t col) {
    const std::vector<std::string_view>* lines = Lines(file);
    if (!lines || line == 0 || line > lines->size() || col == 0) return 0;
    std::string_view text = (*lines)[line - 1];
    if (col - 1 > text.size()) return 0;
    return Utf16Units(text.substr(0, col - 1)) + 1;
  }

 private:
  const std::vector<std::string_view>* Lines(const std::string& file) {
    auto it = files_.find(file);
    if (it != files_.end()) return it->second.ok ? &it->second.lines : nullptr;
    Entry& e = files_[file];
    if (root_.empty() || file.compare(0, prefix_.size(), prefix_) != 0) return nullptr;
    auto text = ReadFile(root_ / file.substr(prefix_.size()));
    if (!text.ok()) return nullptr;
    e.text = analyse::DecodeDeclaredLatin1(std::move(*text));  // as the analyser read it
    std::string_view rest = e.text;
    while (true) {
      size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      e.lines.push_back(line);
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
    }
    e.ok = true;
    return &e.lines;
  }

  struct Entry {
    bool ok = false;
    std::string text;
    std::vector<std::string_view> lines;
  };
  std::filesystem::path root_;
  std::string prefix_;
  std::map<std::string, Entry> files_;
};

const char* Level(Category c) {
  return c == Category::kUnsupported ? "error" : (c == Category::kUnknown || c == Category::kCuda) ? "warning" : "note";
}

}  // namespace

std::string AnalyseSarif(const AnalyseReport& report, std::string_view tool_version) {
  const std::vector<Finding>& findings = report.findings;
  const std::string prefix = report.project + "/";
  // One rule per analyser rule (its name is the ID), documented from its source file; rules a
  // finding names without a doc (none today) still get an entry.
  std::vector<std::string> ids;
  for (const RuleDoc* d : RuleDocs()) ids.emplace_back(d->name);
  for (const auto& f : findings)
    if (std::find(ids.begin(), ids.end(), f.rule) == ids.end()) ids.push_back(f.rule);
  std::sort(ids.begin(), ids.end());
  std::map<std::string, size_t> rule_index;
  for (size_t i = 0; i < ids.size(); ++i) rule_index[ids[i]] = i;

  JsonWriter j;
  j.BeginObject();
  j.Key("$schema").String("https://json.schemastore.org/sarif-2.1.0.json");
  j.Key("version").String("2.1.0");
  j.Key("runs").BeginArray().BeginObject();
  j.Key("tool").BeginObject().Key("driver").BeginObject();
  j.Key("name").String("portkit");
  j.Key("version").String(std::string(tool_version));
  j.Key("rules").BeginArray();
  for (const auto& id : ids) {
    const RuleDoc* doc = FindRuleDoc(id);
    j.BeginObject().Key("id").String(id);
    if (doc) {
      j.Key("name").String(id);
      j.Key("shortDescription").BeginObject().Key("text").String(RuleSummary(*doc)).EndObject();
      std::string full = std::string(doc->what) + (doc->why.empty() ? "" : " Why it matters: " + std::string(doc->why));
      j.Key("fullDescription").BeginObject().Key("text").String(full).EndObject();
      j.Key("help")
          .BeginObject()
          .Key("text")
          .String(RuleDocText(*doc))
          .Key("markdown")
          .String(RuleDocMarkdown(*doc))
          .EndObject();
      j.Key("properties")
          .BeginObject()
          .Key("tags")
          .BeginArray()
          .String(std::string(doc->family))
          .EndArray()
          .EndObject();
    } else {
      j.Key("shortDescription").BeginObject().Key("text").String(id).EndObject();
    }
    j.EndObject();
  }
  j.EndArray().EndObject().EndObject();
  // Project-level advice (no file) has no place in code scanning: it is left out of the
  // results and listed as notifications of the run instead.
  std::vector<const Finding*> project_level;
  for (const auto& f : findings)
    if (f.file == "NA" || f.start_line == 0 || f.file.compare(0, prefix.size(), prefix) != 0)
      project_level.push_back(&f);
  j.Key("invocations").BeginArray().BeginObject();
  j.Key("executionSuccessful").Bool(true);
  if (!project_level.empty()) {
    j.Key("toolExecutionNotifications").BeginArray();
    for (const Finding* f : project_level) {
      j.BeginObject();
      j.Key("level").String("note");
      j.Key("message")
          .BeginObject()
          .Key("text")
          .String("project-level advice (not tied to a line, so not a result): " + f->op + ": " + f->tip)
          .EndObject();
      j.Key("associatedRule")
          .BeginObject()
          .Key("id")
          .String(f->rule)
          .Key("index")
          .Int(static_cast<int64_t>(rule_index[f->rule]))
          .EndObject();
      j.EndObject();
    }
    j.EndArray();
  }
  j.EndObject().EndArray();
  j.Key("originalUriBaseIds")
      .BeginObject()
      .Key("SRCROOT")
      .BeginObject()
      .Key("description")
      .BeginObject()
      .Key("text")
      .String("the analysed folder (" + report.project + ", given with -i)")
      .EndObject()
      .EndObject()
      .EndObject();
  j.Key("columnKind").String("utf16CodeUnits");
  LineCache lines(report.input, report.project);
  j.Key("results").BeginArray();
  for (const auto& f : findings) {
    if (f.file == "NA" || f.start_line == 0 || f.file.compare(0, prefix.size(), prefix) != 0) continue;
    j.BeginObject();
    j.Key("ruleId").String(f.rule);
    j.Key("ruleIndex").Int(static_cast<int64_t>(rule_index[f.rule]));
    j.Key("level").String(Level(f.category));
    j.Key("message").BeginObject().Key("text").String(f.op + ": " + f.tip).EndObject();
    j.Key("locations").BeginArray().BeginObject().Key("physicalLocation").BeginObject();
    j.Key("artifactLocation")
        .BeginObject()
        .Key("uri")
        .String(UriPath(f.file.substr(prefix.size())))
        .Key("uriBaseId")
        .String("SRCROOT")
        .EndObject();
    j.Key("region")
        .BeginObject()
        .Key("startLine")
        .Int(f.start_line)
        .Key("endLine")
        .Int(std::max(f.end_line, f.start_line));
    uint32_t start_col = f.start_col ? lines.Column(f.file, f.start_line, f.start_col) : 0;
    uint32_t end_col = f.end_col ? lines.Column(f.file, std::max(f.end_line, f.start_line), f.end_col) : 0;
    if (start_col) {
      j.Key("startColumn").Int(start_col);
      if (end_col && (f.end_line > f.start_line || end_col >= start_col)) j.Key("endColumn").Int(end_col);
    }
    j.EndObject().EndObject().EndObject().EndArray();
    j.Key("properties")
        .BeginObject()
        .Key("category")
        .String(CategoryName(f.category))
        .Key("confidence")
        .String(ConfidenceName(f.confidence))
        .EndObject();
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
  if (wants("sarif"))
    files.push_back({"report.sarif", AnalyseSarif(report, PORTKIT_VERSION_STRING), report.findings.size()});
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
