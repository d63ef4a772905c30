// The analyse engine: RunAnalyse and the table of modes.
#include <algorithm>
#include <filesystem>
#include <set>

#include "analyse/affinity.h"
#include "analyse/analyse_modes.h"
#include "analyse/analysis_run.h"
#include "analyse/api.h"
#include "analyse/custom_ops.h"
#include "analyse/project_loader.h"
#include "analyse/rule_docs.h"
#include "analyse/rules/affinity_apis/rules.h"
#include "analyse/rules/torch_apis/rules.h"
#include "analyse/source_files.h"
#include "analyse/target.h"
#include "analyse/third_party.h"
#include "core/atomic_file.h"
#include "core/input_files.h"
#include "core/thread_pool.h"

namespace portkit::analyse {
namespace fs = std::filesystem;

namespace {

constexpr AnalyseModeInfo kModes[] = {
    {AnalyseMode::kTorchApis, "torch_apis",
     "unsupported / unknown torch APIs, CUDA-only code, custom CUDA ops, precision and performance advice",
     CsvLayout::kApiFindings, "csv,json", nullptr, &RunTorchApisMode},
    {AnalyseMode::kThirdParty, "third_party",
     "library call graph: which functions reach an unsupported API or a custom CUDA op", CsvLayout::kLibraryImpact,
     "csv,json", nullptr, &RunThirdPartyMode},
    {AnalyseMode::kAffinityApis, "affinity_apis", "fused-API candidates of the target", CsvLayout::kAffinityCalls,
     "csv,json", &PrepareAffinityMode, &RunAffinityMode},
    {AnalyseMode::kDynamicShape, "dynamic_shape", "instrumented copy with a runtime dynamic-shape detector",
     CsvLayout::kNone, "", &PrepareDynamicShapeMode, &RunDynamicShapeMode},
};

void SortUnique(std::vector<Finding>& findings) {
  std::sort(findings.begin(), findings.end());
  findings.erase(std::unique(findings.begin(), findings.end(),
                             [](const Finding& a, const Finding& b) { return !(a < b) && !(b < a); }),
                 findings.end());
}

/// Pass 2 with `rules` over every file, plus the custom CUDA operators of the C++/CUDA sources.
struct RulePass {
  CustomOpTable custom_ops;
  std::vector<Finding> findings;
  std::vector<DefinitionRecord> definitions;
  std::vector<CallRecord> calls;
  std::set<std::string> seen;
};

/// Headers (.h, .hpp, .hxx) are scanned only when a binding names a function that no C++/CUDA
/// source defines, and only those whose text names one: a binding of a function defined in a
/// header (inline, or a template) is then linked to that definition, and through it to CUDA.
void ScanHeadersDefiningBoundFunctions(const std::vector<SourceFile>& others, ThreadPool& pool,
                                       std::vector<CppScan>& scans) {
  std::unordered_set<std::string> defined;
  for (const auto& s : scans) {
    for (const auto& [name, range] : s.function_ranges) defined.insert(name);
    for (const auto& c : s.classes) defined.insert("class:" + c);
  }
  std::vector<std::string> missing;
  for (const auto& s : scans)
    for (const auto& symbol : s.symbols) {
      if (symbol.empty() || symbol.rfind("class:", 0) == 0) continue;
      std::string last = symbol.substr(symbol.rfind(':') == std::string::npos ? 0 : symbol.rfind(':') + 1);
      if (!defined.count(symbol) && !defined.count(last)) missing.push_back(last);
    }
  if (missing.empty()) return;
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  std::vector<const SourceFile*> headers;
  for (const auto& f : others) {
    std::string ext = f.path.extension().string();
    if (ext == ".h" || ext == ".hpp" || ext == ".hxx") headers.push_back(&f);
  }
  std::vector<CppScan> found(headers.size());
  std::vector<char> used(headers.size(), 0);
  pool.ParallelFor(headers.size(), [&](int, size_t i) {
    auto text = ReadFile(headers[i]->path);
    if (!text.ok()) return;
    bool names_one = std::any_of(missing.begin(), missing.end(),
                                 [&](const std::string& m) { return text->find(m) != std::string::npos; });
    if (!names_one) return;
    found[i] = ScanCppSource(*text, headers[i]->display);
    used[i] = 1;
  });
  for (size_t i = 0; i < found.size(); ++i)
    if (used[i]) scans.push_back(std::move(found[i]));
}

void RunRules(ModeRun& run, const RuleFactory& factory, RulePass& out) {
  LoadedProject& project = *run.project;
  ThreadPool& pool = *run.pool;
  // Custom CUDA operators from C++/CUDA sources.
  const auto& cpp = project.sources.cpp;
  std::vector<CppScan> scans(cpp.size());
  pool.ParallelFor(cpp.size(), [&](int, size_t i) {
    auto text = ReadFile(cpp[i].path);
    if (text.ok()) scans[i] = ScanCppSource(*text, cpp[i].display);
  });
  ScanHeadersDefiningBoundFunctions(project.sources.others, pool, scans);
  // Extension builds declared by Python scripts (which module each C++ file becomes, CUDA or
  // CPU) and the project's Python methods (a call on an unknown receiver may be one of them).
  std::vector<ExtensionBuild> builds;
  std::unordered_multimap<std::string, std::pair<int, int>> python_methods;
  for (const auto& f : project.py) {
    if (f.file == nullptr || f.parsed.source.empty()) continue;  // skipped (its text is not kept)
    if (!cpp.empty() || f.parsed.source.find("load_inline") != std::string::npos) {
      auto found = ScanExtensionBuilds(f.parsed.source);
      for (auto& b : found) {
        b.file = f.file->display;
        builds.push_back(std::move(b));
      }
    }
    if (f.summary == nullptr) continue;
    for (const auto& cls : f.summary->classes)
      for (const auto& [method, arity] : cls->method_arity) python_methods.emplace(method, arity);
  }
  out.custom_ops.target_device = run.target.facts().device_type;
  out.custom_ops.Link(std::move(scans), builds);
  out.custom_ops.python_methods = std::move(python_methods);

  run.ctx.logger.Info("Analysis start...");
  std::unordered_set<std::string> watched = WatchedNames(run.target);
  RuleData data{&run.target, &out.custom_ops, run.third_party, run.affinity.get(), &watched};
  std::vector<FileAnalysis> files = AnalyseFiles(project, data, factory, pool, run.ctx.logger);
  for (auto& f : files) {
    std::move(f.findings.begin(), f.findings.end(), std::back_inserter(out.findings));
    std::move(f.definitions.begin(), f.definitions.end(), std::back_inserter(out.definitions));
    std::move(f.calls.begin(), f.calls.end(), std::back_inserter(out.calls));
    out.seen.insert(f.seen.begin(), f.seen.end());
  }
}

/// Registered custom ops are CUDA-specific code too (cuda_op_list.csv).
void AddCustomOpFindings(const CustomOpTable& custom_ops, std::vector<Finding>& findings) {
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

}  // namespace

std::span<const AnalyseModeInfo> AnalyseModes() { return kModes; }

const AnalyseModeInfo& ModeInfo(AnalyseMode mode) {
  for (const auto& m : kModes)
    if (m.mode == mode) return m;
  return kModes[0];  // unreachable: every enumerator has a row
}

std::optional<AnalyseMode> AnalyseModeByName(std::string_view name) {
  for (const auto& m : kModes)
    if (m.name == name) return m.mode;
  return std::nullopt;
}

size_t AnalyseReport::Count(Category category) const {
  return static_cast<size_t>(
      std::count_if(findings.begin(), findings.end(), [category](const Finding& f) { return f.category == category; }));
}

Status RunTorchApisMode(ModeRun& run) {
  RulePass pass;
  RunRules(run, RuleFactory(MakeTorchApiRules), pass);
  AddCustomOpFindings(pass.custom_ops, pass.findings);
  std::vector<std::string> seen_sorted(pass.seen.begin(), pass.seen.end());
  for (const auto& rule : MakeTorchApiProjectRules())
    rule->Finish(pass.findings, seen_sorted, run.target, pass.findings);
  run.report.findings = std::move(pass.findings);
  run.report.custom_ops = std::move(pass.custom_ops.ops);
  return Status::Ok();
}

Status RunThirdPartyMode(ModeRun& run) {
  RulePass pass;
  RunRules(run, RuleFactory(MakeTorchApiRules), pass);
  AddCustomOpFindings(pass.custom_ops, pass.findings);
  run.report.affected =
      PropagateAffected(pass.definitions, pass.calls, pass.findings, run.project->index.PublicSpellings());
  run.ctx.logger.Info(std::to_string(run.report.affected.size()) +
                      " functions of the library reach an unsupported or unknown API or a custom CUDA operator.");
  run.report.findings = std::move(pass.findings);
  run.report.custom_ops = std::move(pass.custom_ops.ops);
  return Status::Ok();
}

Status PrepareAffinityMode(ModeRun& run) {
  auto table = AffinityTable::Load(run.target.facts().dir / "affinity.json");
  if (!table.ok()) return table.status();
  run.affinity = std::make_unique<AffinityTable>(std::move(*table));
  return Status::Ok();
}

Status RunAffinityMode(ModeRun& run) {
  RulePass pass;
  RunRules(run, RuleFactory(MakeAffinityRules), pass);
  auto matched = MatchAffinityTemplates(*run.affinity, pass.definitions, pass.calls);
  std::move(matched.begin(), matched.end(), std::back_inserter(pass.findings));
  run.report.findings = std::move(pass.findings);
  run.report.custom_ops = std::move(pass.custom_ops.ops);
  return Status::Ok();
}

Expected<AnalyseReport> RunAnalyse(const AnalyseOptions& opt, Context& ctx) {
  Logger& log = ctx.logger;
  const AnalyseModeInfo& mode = ModeInfo(opt.mode);
  log.Info("Start to check input path...");
  std::error_code ec;
  fs::path input = opt.input;
  if (!fs::exists(input, ec))
    return NotFound("input " + opt.input.string() + " does not exist; give a folder with the code to analyse (-i DIR)");
  if (!fs::is_directory(input, ec))
    return InvalidArgument("input " + opt.input.string() + " is not a folder; give the folder of the project (-i DIR)");
  input = fs::weakly_canonical(fs::absolute(input), ec);

  AnalyseReport report;
  report.mode = opt.mode;
  report.project = input.filename().string();
  if (report.project.empty()) report.project = "root";
  report.input = input;

  // Everything the run needs is loaded before any file or folder is created.
  for (const auto* list : {&opt.select, &opt.ignore})
    for (const auto& rule : *list)
      if (!FindRuleDoc(rule))
        return InvalidArgument(std::string(list == &opt.select ? "--select" : "--ignore") + ": unknown rule '" + rule +
                               "' (`portkit analyse --explain` lists them)");
  std::string warning;
  auto target = Target::Load(ctx.data_dir, opt.target, opt.version, &warning);
  if (!target.ok()) return target.status();
  if (!warning.empty()) log.Warning(warning);
  report.target = target->name();
  report.list_version = target->list_version();
  std::unique_ptr<ThirdPartyApis> third_party;
  if (!opt.api_files.empty()) {
    auto apis = ThirdPartyApis::Load(opt.api_files);
    if (!apis.ok()) return apis.status();
    third_party = std::make_unique<ThirdPartyApis>(std::move(*apis));
    log.Info("Loaded " + std::to_string(third_party->size()) + " affected third-party APIs from -api files.");
  }
  ModeRun run{opt, ctx, *target, third_party.get(), nullptr, {}, nullptr, nullptr, report};
  if (mode.prepare) PORTKIT_RETURN_IF_ERROR(mode.prepare(run));

  fs::path out_root = fs::absolute(opt.output);
  fs::create_directories(out_root, ec);
  if (ec || !fs::is_directory(out_root))
    return IoError("output " + opt.output.string() + " cannot be created: " + (ec ? ec.message() : "not a folder"));
  report.results_dir = out_root / (report.project + "_analysis");
  // A folder this command did not write is never overwritten without --force (docs/safety.md).
  const bool reused = fs::exists(report.results_dir, ec);
  const OutputMarker marker = reused ? ReadOutputMarker(report.results_dir) : OutputMarker{};
  if (reused && !opt.force && marker.command != "analyse" && !fs::is_empty(report.results_dir, ec))
    return InvalidArgument("output folder " + report.results_dir.string() +
                           " already exists and was not written by portkit analyse; remove it, choose another "
                           "-o, or give --force to write into it");
  if (reused && !opt.force && marker.command == "analyse" && marker.running)
    return InvalidArgument("output folder " + report.results_dir.string() +
                           " is being written by another portkit analyse (pid " + std::to_string(marker.pid) +
                           "); wait for it to end, or give --force");
  fs::create_directories(report.results_dir, ec);
  if (ec || !fs::is_directory(report.results_dir))
    return IoError("output folder " + report.results_dir.string() + " cannot be created" +
                   (ec ? ": " + ec.message() : std::string()));
  if (reused && marker.command == "analyse" && !marker.finished) {
    log.Warning(report.results_dir.string() + ": an earlier portkit analyse (pid " + std::to_string(marker.pid) +
                ") into this folder did not finish (killed?); its output is replaced");
    for (const auto& name : RemoveStaleTemporariesBelow(report.results_dir))
      log.Warning(name + ": removed (left by the run that was killed)");
  }
  // Marked before anything else is written (docs/safety.md, Crash markers), so that a later
  // analyse or migrate of a folder holding it does not walk into it, and a run killed on the way
  // is recognised; the command's last step marks it finished.
  PORTKIT_RETURN_IF_ERROR(MarkOutputStarted(report.results_dir, "analyse"));

  log.Info("PyTorch analysis start working now, please wait for a moment.");
  log.Info("Target " + target->name() +
           (target->list_version().empty() ? "" : ", support list of torch " + target->list_version()) + ", mode " +
           std::string(mode.name) + ".");

  ThreadPool pool(ctx.jobs);
  auto project = std::make_unique<LoadedProject>();
  LoadOptions load{input,         report.project,     {report.results_dir},
                   opt.env_paths, opt.max_file_bytes, target->facts().DeviceMethods()};
  load.exclude_globs = opt.exclude;
  LoadProject(load, log, pool, *project);
  run.project = project.get();
  run.pool = &pool;
  Status st = mode.run(run);
  report.files = project->stats;
  report.problems = project->problems;
  if (!ctx.free_memory_at_end) (void)project.release();  // the process exits soon: the OS frees it
  if (!st.ok()) return st;
  SortUnique(report.findings);
  if (mode.csv != CsvLayout::kNone) {
    const FileStats& stats = report.files;
    log.Info("Analysed " + std::to_string(stats.python_analysed) + " Python files (" +
             std::to_string(stats.syntax_errors) + " with syntax errors), scanned " +
             std::to_string(stats.cpp_scanned) + " C++/CUDA files, skipped " + std::to_string(stats.skipped) + ".");
  }
  // Inline `# portkit: ignore[...]` comments, then --select/--ignore: every caller gets the
  // filtered findings.
  size_t suppressed = ApplyInlineSuppressions(report.findings, report.project, report.input.string());
  size_t filtered = FilterFindingsByRule(report.findings, opt.select, opt.ignore);
  if (suppressed) log.Info(std::to_string(suppressed) + " finding(s) suppressed by `# portkit: ignore` comments.");
  if (filtered) log.Info(std::to_string(filtered) + " finding(s) left out by --select/--ignore.");
  return report;
}

}  // namespace portkit::analyse
