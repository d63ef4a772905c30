#include "analyse/analyse_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <set>

#include "analyse/custom_ops.h"
#include "analyse/dynamic_shape.h"
#include "analyse/project_index.h"
#include "analyse/project_loader.h"
#include "analyse/rules/torch_apis/rules.h"
#include "analyse/source_files.h"
#include "analyse/target.h"
#include "analyse/walker.h"
#include "core/atomic_file.h"
#include "core/csv_writer.h"
#include "core/json_writer.h"
#include "core/table.h"
#include "core/thread_pool.h"

namespace portkit::analyse {
namespace fs = std::filesystem;

void RuleContext::Report(TSNode node, std::string op, std::string tip, Category category,
                         Confidence confidence, std::string_view rule) {
  Finding f;
  f.file = file;
  f.start_line = StartLine(node);
  f.end_line = EndLine(node);
  f.start_col = StartCol(node);
  f.end_col = EndCol(node);
  f.op = std::move(op);
  f.tip = std::move(tip);
  f.category = category;
  f.confidence = confidence;
  f.rule = std::string(rule);
  out_.push_back(std::move(f));
}

namespace {

/// Hands walker events to every rule and records the names seen (for project rules).
class RuleDispatcher : public EventSink {
 public:
  RuleDispatcher(const std::vector<std::unique_ptr<Rule>>& rules, RuleContext& ctx,
                 std::set<std::string>& seen)
      : rules_(rules), ctx_(ctx), seen_(seen) {}
  void OnCall(const CallEvent& ev) override {
    for (const auto& q : ev.lookup) seen_.insert(q);
    if (!ev.method.empty()) seen_.insert("." + std::string(ev.method));
    for (const auto& r : rules_) r->OnCall(ev, ctx_);
  }
  void OnAttribute(const AttributeEvent& ev) override {
    seen_.insert(ev.qname);
    for (const auto& r : rules_) r->OnAttribute(ev, ctx_);
  }
  void OnString(const StringEvent& ev) override {
    if (ev.value.size() < 64) seen_.insert(ev.value);
    for (const auto& r : rules_) r->OnString(ev, ctx_);
  }

 private:
  const std::vector<std::unique_ptr<Rule>>& rules_;
  RuleContext& ctx_;
  std::set<std::string>& seen_;
};

std::string Csv(const std::vector<const Finding*>& rows) {
  CsvWriter w({"File", "Start Line", "End Line", "OP", "Tips"});
  for (const Finding* f : rows) {
    bool na = f->file == "NA";
    w.AddRow({f->file, na ? "NA" : std::to_string(f->start_line),
              na ? "NA" : std::to_string(f->end_line), f->op, f->tip});
  }
  return w.str();
}

std::string ReportJson(const std::vector<Finding>& findings, const AnalyseOptions& opt,
                       const Target& target, const FileStats& stats,
                       const std::vector<FileProblem>& problems, const CustomOpTable& ops) {
  JsonWriter j;
  j.BeginObject();
  j.Key("tool").String("portkit analyse");
  j.Key("mode").String(opt.mode);
  j.Key("target").String(target.name());
  j.Key("torch_list_version").String(target.list_version());
  j.Key("files").BeginObject();
  j.Key("python_analysed").Int(static_cast<int64_t>(stats.python_analysed));
  j.Key("cpp_scanned").Int(static_cast<int64_t>(stats.cpp_scanned));
  j.Key("syntax_errors").Int(static_cast<int64_t>(stats.syntax_errors));
  j.Key("skipped").Int(static_cast<int64_t>(stats.skipped));
  j.EndObject();
  j.Key("problems").BeginArray();
  for (const auto& p : problems) {
    j.BeginObject();
    j.Key("file").String(p.file);
    j.Key("line").Int(p.line);
    j.Key("column").Int(p.col);
    j.Key("kind").String(p.kind);
    j.Key("message").String(p.message);
    j.EndObject();
  }
  j.EndArray();
  j.Key("custom_ops").BeginArray();
  for (const auto& op : ops.ops) {
    j.BeginObject();
    j.Key("name").String(op.name);
    if (!op.ns.empty()) j.Key("namespace").String(op.ns);
    j.Key("arg_count").Int(op.arg_count);
    j.Key("file").String(op.file);
    j.Key("line").Int(op.line);
    j.Key("registered_by").String(op.how);
    j.EndObject();
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
    j.Key("tip").String(f.tip);
    j.Key("confidence").String(ConfidenceName(f.confidence));
    j.Key("rule").String(f.rule);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.str();
}

}  // namespace

int RunAnalyse(const AnalyseOptions& opt, Context& ctx) {
  Logger& log = ctx.logger;
  log.Info("Start to check input path...");
  std::error_code ec;
  fs::path input = fs::path(opt.input);
  if (!fs::exists(input, ec)) {
    log.Error("input " + opt.input + " does not exist; give a folder with the code to analyse (-i DIR)");
    return 2;
  }
  if (!fs::is_directory(input, ec)) {
    log.Error("input " + opt.input + " is not a folder; give the folder of the project (-i DIR)");
    return 2;
  }
  input = fs::weakly_canonical(fs::absolute(input), ec);
  if (opt.mode != "torch_apis" && opt.mode != "dynamic_shape") {
    log.Error("mode '" + opt.mode + "' is not available in this build; available: torch_apis, dynamic_shape");
    return 2;
  }
  fs::path out_root = fs::absolute(fs::path(opt.output));
  fs::create_directories(out_root, ec);
  if (ec || !fs::is_directory(out_root)) {
    log.Error("output " + opt.output + " cannot be created: " + (ec ? ec.message() : "not a folder"));
    return 2;
  }
  std::string base = input.filename().string();
  if (base.empty()) base = "root";
  fs::path results = out_root / (base + "_analysis");
  fs::create_directories(results, ec);
  if (ec || ::access(results.c_str(), W_OK) != 0) {
    log.Error("output folder " + results.string() + " cannot be written" +
              (ec ? ": " + ec.message() : std::string(": permission denied")));
    return 2;
  }

  std::string warning;
  auto target = Target::Load(ctx.data_dir, opt.target, opt.version, &warning);
  if (!target.ok()) {
    log.Error(target.status().message());
    return 2;
  }
  if (!warning.empty()) log.Warning(warning);
  log.Info("PyTorch analysis start working now, please wait for a moment.");
  log.Info("Target " + target->name() +
           (target->list_version().empty() ? "" : ", support list of torch " + target->list_version()) +
           ", mode " + opt.mode + ".");

  ThreadPool pool(ctx.jobs);
  auto project = std::make_unique<LoadedProject>();
  LoadProject({input, base, {results}, opt.env_paths, opt.max_file_bytes}, log, pool, *project);
  if (opt.mode == "dynamic_shape") return RunDynamicShape(opt, *project, results, base, ctx);
  const PySyntax& syntax = project->syntax;
  SourceSet& sources = project->sources;
  std::vector<PyFile>& py = project->py;
  ProjectIndex& index = project->index;
  FileStats& stats = project->stats;
  std::vector<FileProblem>& problems = project->problems;
  // 3. Custom CUDA operators from C++/CUDA sources.
  std::vector<CppScan> scans(sources.cpp.size());
  pool.ParallelFor(sources.cpp.size(), [&](int, size_t i) {
    auto text = ReadFile(sources.cpp[i].path);
    if (text.ok()) scans[i] = ScanCppSource(*text, sources.cpp[i].display);
  });
  CustomOpTable custom_ops;
  custom_ops.Link(std::move(scans));

  // 4. Analyse every parsed file (pass 2).
  log.Info("Analysis start...");
  Progress progress(log, stats.python_analysed);
  std::vector<std::vector<Finding>> per_file(py.size());
  std::vector<std::set<std::string>> seen(py.size());
  const Target& tgt = *target;
  auto known = [&tgt](const std::string& q) { return tgt.Known(q); };
  pool.ParallelFor(py.size(), [&](int, size_t i) {
    if (!py[i].summary) return;
    progress.Start("Start analysis " + py[i].file->display + ".");
    std::vector<std::unique_ptr<Rule>> rules = MakeTorchApiRules();
    RuleContext rctx(syntax, py[i].parsed.source, py[i].file->display, tgt, custom_ops, per_file[i]);
    RuleDispatcher dispatcher(rules, rctx, seen[i]);
    FileWalker walker(syntax, py[i].parsed, *py[i].summary, index, known, dispatcher);
    walker.Run();
    progress.Done("Analysis " + py[i].file->display + " complete.");
  });

  std::vector<Finding> findings;
  std::set<std::string> all_seen;
  for (size_t i = 0; i < py.size(); ++i) {
    findings.insert(findings.end(), per_file[i].begin(), per_file[i].end());
    all_seen.insert(seen[i].begin(), seen[i].end());
  }
  // Registered custom ops are CUDA-specific code too (cuda_op_list.csv).
  for (const auto& op : custom_ops.ops) {
    Finding f;
    f.file = op.file;
    f.start_line = f.end_line = op.line;
    f.op = op.ns.empty() ? op.name : op.ns + "::" + op.name;
    f.tip = "Custom CUDA operator registered with " + op.how +
            (op.arg_count >= 0 ? " (" + std::to_string(op.arg_count) + " arguments)" : "");
    f.category = Category::kCuda;
    f.rule = "custom_cuda_op";
    findings.push_back(std::move(f));
  }
  std::vector<std::string> seen_sorted(all_seen.begin(), all_seen.end());
  for (const auto& rule : MakeTorchApiProjectRules()) rule->Finish(findings, seen_sorted, tgt, findings);
  std::sort(findings.begin(), findings.end());
  findings.erase(std::unique(findings.begin(), findings.end(),
                             [](const Finding& a, const Finding& b) { return !(a < b) && !(b < a); }),
                 findings.end());

  // 5. Write the reports.
  std::map<Category, std::vector<const Finding*>> by_cat;
  for (const auto& f : findings) by_cat[f.category].push_back(&f);
  bool want_csv = std::find(opt.formats.begin(), opt.formats.end(), "csv") != opt.formats.end();
  bool want_json = std::find(opt.formats.begin(), opt.formats.end(), "json") != opt.formats.end();
  std::vector<std::vector<std::string>> table;
  auto write = [&](const std::string& name, const std::string& content, size_t rows) -> bool {
    Status st = WriteFileAtomic(results / name, content);
    if (!st.ok()) {
      log.Error(st.message());
      return false;
    }
    table.push_back({name, std::to_string(rows)});
    return true;
  };
  bool ok = true;
  if (want_csv) {
    const std::pair<const char*, Category> kFiles[] = {
        {"unsupported_api.csv", Category::kUnsupported}, {"unknown_api.csv", Category::kUnknown},
        {"api_precision_advice.csv", Category::kPrecision},
        {"api_performance_advice.csv", Category::kPerformance}};
    for (const auto& [name, cat] : kFiles) ok &= write(name, Csv(by_cat[cat]), by_cat[cat].size());
    // cuda_op_list.csv: one row per (file, api).
    std::set<std::pair<std::string, std::string>> cuda_rows;
    for (const Finding* f : by_cat[Category::kCuda]) cuda_rows.insert({f->file, f->op});
    CsvWriter cuda({"File", "Api"});
    for (const auto& [file, api] : cuda_rows) cuda.AddRow({file, api});
    ok &= write("cuda_op_list.csv", cuda.str(), cuda.rows());
  }
  if (want_json)
    ok &= write("report.json", ReportJson(findings, opt, tgt, stats, problems, custom_ops), findings.size());
  std::sort(table.begin(), table.end());
  progress.Finish("Analyse run success, welcome to the next use.");
  log.Info("Analysed " + std::to_string(stats.python_analysed) + " Python files (" +
           std::to_string(stats.syntax_errors) + " with syntax errors), scanned " +
           std::to_string(stats.cpp_scanned) + " C++/CUDA files, skipped " +
           std::to_string(stats.skipped) + ".");
  log.Info("The detailed transplant result files are in the output path you defined, the relative path is " +
           base + "_analysis.");
  table.push_back({"(python files analysed)", std::to_string(stats.python_analysed)});
  table.push_back({"(files with syntax errors)", std::to_string(stats.syntax_errors)});
  table.push_back({"(files skipped)", std::to_string(stats.skipped)});
  std::string rendered = RenderTable({"files", "statistics"}, table);
  std::fwrite(rendered.data(), 1, rendered.size(), stdout);
  std::fflush(stdout);
  Status st = WriteFileAtomic(results / "pytorch_analysis.txt", log.Contents() + rendered);
  if (!st.ok()) {
    log.Error(st.message());
    ok = false;
  }
  return ok ? 0 : 1;
}

int AnalyseMain(int argc, char** argv, Context& ctx) {
  // The seed spells some long options with one dash; CLI11 wants two.
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-env") a = "--env-path";
    else if (a == "-api") a = "--api-files";
    args.push_back(a);
  }
  AnalyseOptions opt;
  std::string formats = "csv,json";
  std::vector<std::string> api_files;
  CLI::App app{"Static migration analysis of PyTorch code (seed 001). Results go to "
               "<output>/<basename(input)>_analysis/.",
               "portkit analyse"};
  app.add_option("-i,--input", opt.input, "folder of the training code or library to analyse")
      ->required();
  app.add_option("-o,--output", opt.output, "folder for results (created if missing)")->required();
  app.add_option("-v,--version", opt.version,
                 "torch version of the analysed code (2.1.0, 2.6.0, 2.7.0, 2.8.0; others use the "
                 "nearest list with a warning; default: newest)");
  app.add_option("-m,--mode", opt.mode,
                 "analysis mode: torch_apis (default) or dynamic_shape (instrumented copy with a "
                 "runtime detector); third_party and affinity_apis are planned")
      ->check(CLI::IsMember({"torch_apis", "third_party", "affinity_apis", "dynamic_shape"}));
  app.add_option("--target", opt.target, "target platform: npu (Ascend, default) or cpu (flags CUDA-only code)")
      ->check(CLI::IsMember({"npu", "cpu"}));
  app.add_option("-e,--env-path", opt.env_paths,
                 "extra import roots (like PYTHONPATH) used to resolve names; also -env");
  app.add_option("--api-files", api_files, "third_party results (planned); also -api");
  app.add_option("-j,--jobs", ctx.jobs, "worker threads (default: all cores)");
  app.add_option("--format", formats, "outputs to write: csv, json or csv,json (default)");
  size_t max_mb = 64;
  app.add_option("--max-file-mb", max_mb, "skip Python files larger than this (default 64)");
  std::vector<const char*> cargv;
  for (auto& a : args) cargv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(cargv.size()), const_cast<char**>(cargv.data()));
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (!api_files.empty()) {
    ctx.logger.Error("-api/--api-files needs the third_party mode, which this build does not have yet");
    return 2;
  }
  opt.formats.clear();
  size_t start = 0;
  while (start <= formats.size()) {
    size_t comma = formats.find(',', start);
    std::string f = formats.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (f != "csv" && f != "json") {
      ctx.logger.Error("--format: unknown format '" + f + "'; use csv, json or csv,json");
      return 2;
    }
    opt.formats.push_back(f);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  opt.max_file_bytes = max_mb << 20;
  return RunAnalyse(opt, ctx);
}

}  // namespace portkit::analyse
