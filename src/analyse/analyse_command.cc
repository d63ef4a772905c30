#include "analyse/analyse_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <set>

#include "analyse/affinity.h"
#include "analyse/analysis_run.h"
#include "analyse/custom_ops.h"
#include "analyse/report_writer.h"
#include "analyse/rules/affinity_apis/rules.h"
#include "analyse/third_party.h"
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

namespace {

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

void SortUnique(std::vector<Finding>& findings) {
  std::sort(findings.begin(), findings.end());
  findings.erase(std::unique(findings.begin(), findings.end(),
                             [](const Finding& a, const Finding& b) { return !(a < b) && !(b < a); }),
                 findings.end());
}

bool Wants(const AnalyseOptions& opt, const char* format) {
  return std::find(opt.formats.begin(), opt.formats.end(), format) != opt.formats.end();
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
  std::unique_ptr<ThirdPartyApis> third_party;
  if (!opt.api_files.empty()) {
    auto apis = ThirdPartyApis::Load(opt.api_files);
    if (!apis.ok()) {
      log.Error(apis.status().message());
      return 2;
    }
    third_party = std::make_unique<ThirdPartyApis>(std::move(*apis));
    log.Info("Loaded " + std::to_string(third_party->size()) + " affected third-party APIs from -api files.");
  }
  std::unique_ptr<AffinityTable> affinity;
  if (opt.mode == "affinity_apis") {
    auto table = AffinityTable::Load(target->facts().dir / "affinity.json");
    if (!table.ok()) {
      log.Error(table.status().message());
      return 2;
    }
    affinity = std::make_unique<AffinityTable>(std::move(*table));
  }
  log.Info("PyTorch analysis start working now, please wait for a moment.");
  log.Info("Target " + target->name() +
           (target->list_version().empty() ? "" : ", support list of torch " + target->list_version()) +
           ", mode " + opt.mode + ".");

  ThreadPool pool(ctx.jobs);
  auto project = std::make_unique<LoadedProject>();
  LoadProject({input, base, {results}, opt.env_paths, opt.max_file_bytes, target->facts().DeviceMethods()}, log,
              pool, *project);
  if (opt.mode == "dynamic_shape") return RunDynamicShape(opt, *project, results, base, ctx);
  const FileStats& stats = project->stats;

  // Custom CUDA operators from C++/CUDA sources.
  const auto& cpp = project->sources.cpp;
  std::vector<CppScan> scans(cpp.size());
  pool.ParallelFor(cpp.size(), [&](int, size_t i) {
    auto text = ReadFile(cpp[i].path);
    if (text.ok()) scans[i] = ScanCppSource(*text, cpp[i].display);
  });
  CustomOpTable custom_ops;
  custom_ops.Link(std::move(scans));

  // Every file through the mode's rules (pass 2).
  log.Info("Analysis start...");
  std::unordered_set<std::string> watched = WatchedNames(*target);
  RuleData data{&*target, &custom_ops, third_party.get(), affinity.get(), &watched};
  RuleFactory factory = opt.mode == "affinity_apis" ? RuleFactory(MakeAffinityRules) : RuleFactory(MakeTorchApiRules);
  std::vector<FileAnalysis> files = AnalyseFiles(*project, data, factory, pool, log);
  std::vector<Finding> findings;
  std::vector<DefinitionRecord> definitions;
  std::vector<CallRecord> calls;
  std::set<std::string> all_seen;
  for (auto& f : files) {
    std::move(f.findings.begin(), f.findings.end(), std::back_inserter(findings));
    std::move(f.definitions.begin(), f.definitions.end(), std::back_inserter(definitions));
    std::move(f.calls.begin(), f.calls.end(), std::back_inserter(calls));
    all_seen.insert(f.seen.begin(), f.seen.end());
  }
  if (opt.mode != "affinity_apis") {
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
  }
  if (opt.mode == "torch_apis") {
    std::vector<std::string> seen_sorted(all_seen.begin(), all_seen.end());
    for (const auto& rule : MakeTorchApiProjectRules()) rule->Finish(findings, seen_sorted, *target, findings);
  }
  if (opt.mode == "affinity_apis") {
    auto matched = MatchAffinityTemplates(*affinity, definitions, calls);
    std::move(matched.begin(), matched.end(), std::back_inserter(findings));
  }
  SortUnique(findings);

  // Reports.
  ReportWriter out(results, log);
  if (Wants(opt, "csv")) {
    if (opt.mode == "torch_apis") {
      std::map<Category, std::vector<const Finding*>> by_cat;
      for (const auto& f : findings) by_cat[f.category].push_back(&f);
      const std::pair<const char*, Category> kFiles[] = {
          {"unsupported_api.csv", Category::kUnsupported}, {"unknown_api.csv", Category::kUnknown},
          {"api_precision_advice.csv", Category::kPrecision},
          {"api_performance_advice.csv", Category::kPerformance}};
      for (const auto& [name, cat] : kFiles) out.Write(name, AdviceCsv(by_cat[cat]), by_cat[cat].size());
      out.Write("cuda_op_list.csv", CudaOpList(findings));
    } else if (opt.mode == "third_party") {
      auto affected = PropagateAffected(definitions, calls, findings, project->index.PublicSpellings());
      log.Info(std::to_string(affected.size()) + " functions of the library reach an unsupported or "
               "unknown API or a custom CUDA operator.");
      for (auto& [name, csv] : ThirdPartyCsvs(affected)) out.Write(name, csv);
      out.Write("cuda_op_list.csv", CudaOpList(findings));
    } else {
      CsvWriter w({"File", "Start Line", "End Line", "Api Type", "Api Call Name", "Affinity Api Name"});
      for (const auto& f : findings)
        if (f.category == Category::kAffinity)
          w.AddRow({f.file, std::to_string(f.start_line), std::to_string(f.end_line), f.api_type, f.op, f.tip});
      out.Write("affinity_api_call.csv", w);
    }
  }
  RunSummary summary{opt.mode, target->name(), target->list_version(), stats, &project->problems, &custom_ops};
  if (Wants(opt, "json")) out.Write("report.json", ReportJson(findings, summary), findings.size());
  if (Wants(opt, "sarif")) out.Write("report.sarif", ReportSarif(findings, PORTKIT_VERSION_STRING, base), findings.size());
  log.Info("Analysed " + std::to_string(stats.python_analysed) + " Python files (" +
           std::to_string(stats.syntax_errors) + " with syntax errors), scanned " +
           std::to_string(stats.cpp_scanned) + " C++/CUDA files, skipped " +
           std::to_string(stats.skipped) + ".");
  int rc = out.Finish(base, {{"(python files analysed)", std::to_string(stats.python_analysed)},
                              {"(files with syntax errors)", std::to_string(stats.syntax_errors)},
                              {"(files skipped)", std::to_string(stats.skipped)}});
  if (!ctx.free_memory_at_end) (void)project.release();  // the process exits now
  return rc;
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
                 "analysis mode: torch_apis (default), third_party (library call graph), "
                 "affinity_apis (fused-API candidates), dynamic_shape (instrumented copy with a "
                 "runtime detector)")
      ->check(CLI::IsMember({"torch_apis", "third_party", "affinity_apis", "dynamic_shape"}));
  app.add_option("--target", opt.target, target::TargetOptionHelp(ctx.data_dir, false))
      ->check([&ctx](const std::string& v) { return target::CheckTargetChoice(ctx.data_dir, v, false); });
  app.add_option("-e,--env-path", opt.env_paths,
                 "extra import roots (like PYTHONPATH) used to resolve names; also -env");
  app.add_option("--api-files", opt.api_files,
                 "full_unsupported_results.csv of earlier third_party runs on libraries the code "
                 "uses; their affected APIs are reported as unsupported; also -api");
  app.add_option("-j,--jobs", ctx.jobs, "worker threads (default: all cores)");
  app.add_option("--format", formats, "outputs to write, comma-separated: csv, json, sarif (default csv,json)");
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
  opt.formats.clear();
  size_t start = 0;
  while (start <= formats.size()) {
    size_t comma = formats.find(',', start);
    std::string f = formats.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (f != "csv" && f != "json" && f != "sarif") {
      ctx.logger.Error("--format: unknown format '" + f + "'; use csv, json, sarif or a comma list");
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
