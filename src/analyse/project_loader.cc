#include "analyse/project_loader.h"

#include <fnmatch.h>
#include <malloc.h>

#include <algorithm>

namespace portkit::analyse {
namespace fs = std::filesystem;

bool ExcludedByGlobs(std::string_view rel, const std::vector<std::string>& globs) {
  std::string path(rel);
  for (const auto& glob : globs) {
    bool by_name = glob.find('/') == std::string::npos;
    // The path itself, then each folder above it ("a/b/c.py": "a/b", "a").
    for (size_t end = path.size(); end != std::string::npos && end > 0; end = path.rfind('/', end - 1)) {
      std::string part = path.substr(0, end);
      if (fnmatch(glob.c_str(), part.c_str(), 0) == 0) return true;
      if (by_name) {
        size_t slash = part.rfind('/');
        std::string name = slash == std::string::npos ? part : part.substr(slash + 1);
        if (fnmatch(glob.c_str(), name.c_str(), 0) == 0) return true;
      }
      if (end == 0) break;
    }
  }
  return false;
}

void LoadProject(const LoadOptions& opt, Logger& log, ThreadPool& pool, LoadedProject& out) {
  std::error_code ec;
  out.index.SetModuleSelfMethods(opt.module_self_methods);
  SourceSet& sources = out.sources;
  sources = DiscoverSources(opt.input, opt.display_prefix, opt.exclude, opt.max_file_bytes);
  if (!opt.exclude_globs.empty()) {
    size_t left_out = 0;
    for (auto* group : {&sources.python, &sources.cpp, &sources.others, &sources.links}) {
      size_t before = group->size();
      std::erase_if(*group, [&](const SourceFile& f) { return ExcludedByGlobs(f.rel, opt.exclude_globs); });
      left_out += before - group->size();
    }
    std::erase_if(sources.problems, [&](const FileProblem& p) {
      std::string_view rel = p.file;
      if (rel.size() > opt.display_prefix.size() && rel.substr(0, opt.display_prefix.size()) == opt.display_prefix &&
          rel[opt.display_prefix.size()] == '/')
        rel.remove_prefix(opt.display_prefix.size() + 1);
      return ExcludedByGlobs(rel, opt.exclude_globs);
    });
    if (left_out) log.Info(std::to_string(left_out) + " file(s) left out by --exclude.");
  }
  for (const auto& p : sources.problems) log.Warning(p.file + ": " + p.message);
  const PySyntax& syntax = out.syntax;
  std::vector<std::unique_ptr<PythonParser>> parsers;
  for (int i = 0; i < pool.size(); ++i) parsers.push_back(std::make_unique<PythonParser>());

  // Parse every Python file once and summarise its top level (pass 1).
  std::vector<PyFile>& py = out.py;
  py.resize(sources.python.size());
  // Trees are kept between passes for the first files up to a budget: a tree takes 60-150 times
  // its source. The files past it are parsed again by each later pass.
  uint64_t kept = 0;
  for (size_t i = 0; i < sources.python.size(); ++i) {
    auto size = fs::file_size(sources.python[i].path, ec);
    if (ec || size > opt.max_file_bytes) continue;
    py[i].keep_tree = kept + size <= opt.keep_trees_bytes;
    if (py[i].keep_tree) kept += size;
  }
  std::vector<std::unique_ptr<ModuleSummary>> summaries(sources.python.size());
  std::vector<FileProblem> load_problems(sources.python.size());
  std::vector<char> empty(sources.python.size(), 0);
  pool.ParallelFor(sources.python.size(), [&](int worker, size_t i) {
    const SourceFile& f = sources.python[i];
    py[i].file = &f;
    auto text = LoadPythonSource(f, opt.max_file_bytes, /*decode_latin1=*/true, &py[i].codec);
    if (!text.ok()) {
      load_problems[i] = {f.display, 0, 0, "skipped", text.status().message()};
      return;
    }
    if (text->empty()) empty[i] = 1;
    BigTreeGuard one_big_tree(out, text->size());
    py[i].parsed = parsers[worker]->Parse(std::move(*text));
    if (!py[i].parsed.tree) {
      // Refused before parsing (absurd nesting) or given up by tree-sitter: skipped, with a note.
      const ParsedSource& p = py[i].parsed;
      std::string why = p.refused.empty() ? "the parser gave up on it" : p.refused;
      load_problems[i] = {
          f.display, p.error_line, p.error_col, "skipped",
          f.display +
              (p.error_line ? ":" + std::to_string(p.error_line) + ":" + std::to_string(p.error_col) : std::string()) +
              ": " + why + "; not analysed"};
      py[i].parsed = ParsedSource();
      return;
    }
    summaries[i] = std::make_unique<ModuleSummary>(SummariseModule(syntax, py[i].parsed, f.module, f.is_package));
    py[i].summary = summaries[i].get();
    ReleaseTree(out, py[i]);
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
      FileProblem p{py[i].file->display, py[i].parsed.error_line, py[i].parsed.error_col, "syntax_error",
                    py[i].parsed.error_what};
      log.Warning(p.file + ":" + std::to_string(p.line) + ":" + std::to_string(p.col) + ": syntax error: " + p.message +
                  " (the parsable parts are still analysed)");
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
      auto text = LoadPythonSource(f, opt.max_file_bytes, /*decode_latin1=*/true);
      if (!text.ok()) continue;
      ParsedSource parsed = parser.Parse(std::move(*text));
      if (!parsed.tree) continue;
      index.Add(std::make_unique<ModuleSummary>(SummariseModule(syntax, parsed, f.module, f.is_package)), f.aliases);
    }
  }
  index.Freeze();
  stats.cpp_scanned = sources.cpp.size();
  for (const auto& f : py) stats.python_analysed += f.summary != nullptr;
  stats.skipped = problems.size() - stats.syntax_errors;
}

BigTreeGuard::BigTreeGuard(LoadedProject& project, size_t source_bytes) {
  if (source_bytes <= kBigTreeSourceBytes) return;
  held_ = &project.big_tree;
  held_->lock();
}

BigTreeGuard::~BigTreeGuard() {
  if (held_) held_->unlock();
}

ParsedSource* TreeOf(LoadedProject& /*project*/, PyFile& f, PythonParser& parser) {
  if (!f.summary) return nullptr;
  if (!f.parsed.tree) f.parsed = parser.Parse(std::move(f.parsed.source), /*nesting_checked=*/true);
  return f.parsed.tree ? &f.parsed : nullptr;
}

void ReleaseTree(LoadedProject& /*project*/, PyFile& f) {
  if (f.keep_tree || !f.parsed.tree) return;
  ts_tree_delete(f.parsed.tree);
  f.parsed.tree = nullptr;
  // A big tree's memory goes back to the system: the next one may be parsed by another thread,
  // whose malloc arena would not reuse these pages (measured: twice the peak without this).
  if (f.parsed.source.size() > kBigTreeSourceBytes) malloc_trim(0);
}

}  // namespace portkit::analyse
