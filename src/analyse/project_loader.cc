#include "analyse/project_loader.h"

namespace portkit::analyse {
namespace fs = std::filesystem;

void LoadProject(const LoadOptions& opt, Logger& log, ThreadPool& pool, LoadedProject& out) {
  std::error_code ec;
  out.index.SetModuleSelfMethods(opt.module_self_methods);
  SourceSet& sources = out.sources;
  sources = DiscoverSources(opt.input, opt.display_prefix, opt.exclude, opt.max_file_bytes);
  for (const auto& p : sources.problems) log.Warning(p.file + ": " + p.message);
  const PySyntax& syntax = out.syntax;
  std::vector<std::unique_ptr<PythonParser>> parsers;
  for (int i = 0; i < pool.size(); ++i) parsers.push_back(std::make_unique<PythonParser>());

  // Parse every Python file once and summarise its top level (pass 1).
  std::vector<PyFile>& py = out.py;
  py.resize(sources.python.size());
  std::vector<std::unique_ptr<ModuleSummary>> summaries(sources.python.size());
  std::vector<FileProblem> load_problems(sources.python.size());
  std::vector<char> empty(sources.python.size(), 0);
  pool.ParallelFor(sources.python.size(), [&](int worker, size_t i) {
    const SourceFile& f = sources.python[i];
    py[i].file = &f;
    auto text = LoadPythonSource(f, opt.max_file_bytes, opt.decode_latin1);
    if (!text.ok()) {
      load_problems[i] = {f.display, 0, 0, "skipped", text.status().message()};
      return;
    }
    if (text->empty()) empty[i] = 1;
    py[i].parsed = parsers[worker]->Parse(std::move(*text));
    summaries[i] = std::make_unique<ModuleSummary>(
        SummariseModule(syntax, py[i].parsed, f.module, f.is_package));
    py[i].summary = summaries[i].get();
  });
  FileStats& stats = out.stats;
  std::vector<FileProblem>& problems = out.problems;
  problems = sources.problems;
  ProjectIndex& index = out.index;
  for (size_t i = 0; i < py.size(); ++i) {
    if (!load_problems[i].kind.empty()) {
      log.Warning(load_problems[i].message);
      problems.push_back(load_problems[i]);
      continue;
    }
    if (empty[i]) {
      log.Info(py[i].file->display + ": empty file; nothing to analyse");
      index.Add(std::move(summaries[i]), py[i].file->aliases);
      py[i].summary = nullptr;
      continue;
    }
    if (py[i].parsed.has_error()) {
      ++stats.syntax_errors;
      FileProblem p{py[i].file->display, py[i].parsed.error_line, py[i].parsed.error_col,
                    "syntax_error", py[i].parsed.error_what};
      log.Warning(p.file + ":" + std::to_string(p.line) + ":" + std::to_string(p.col) +
                  ": syntax error: " + p.message + " (the parsable parts are still analysed)");
      problems.push_back(std::move(p));
    }
    index.Add(std::move(summaries[i]), py[i].file->aliases);
  }
  // -env roots: indexed for name resolution, not reported.
  for (const auto& env : opt.env_paths) {
    if (!fs::is_directory(env, ec)) {
      log.Warning("-env " + env + " is not a folder; ignored");
      continue;
    }
    SourceSet env_sources = DiscoverSources(fs::absolute(env), "", opt.exclude, opt.max_file_bytes);
    PythonParser parser;
    for (const auto& f : env_sources.python) {
      auto text = LoadPythonSource(f, opt.max_file_bytes, opt.decode_latin1);
      if (!text.ok()) continue;
      ParsedSource parsed = parser.Parse(std::move(*text));
      index.Add(std::make_unique<ModuleSummary>(SummariseModule(syntax, parsed, f.module, f.is_package)),
                f.aliases);
    }
  }
  index.Freeze();
  stats.cpp_scanned = sources.cpp.size();
  for (const auto& f : py) stats.python_analysed += f.summary != nullptr;
  stats.skipped = problems.size() - stats.syntax_errors;

}

}  // namespace portkit::analyse
