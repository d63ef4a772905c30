#pragma once
/// Loading a project for analysis, shared by the analyse modes: discovery, reading and checking
/// files, parsing each Python file once (in parallel), pass-1 summaries and the project index.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "analyse/module_summary.h"
#include "analyse/project_index.h"
#include "analyse/python_syntax.h"
#include "analyse/source_files.h"
#include "core/log.h"
#include "core/thread_pool.h"

namespace portkit::analyse {

struct PyFile {
  const SourceFile* file = nullptr;
  ParsedSource parsed;              ///< empty when the file was skipped
  ModuleSummary* summary = nullptr; ///< null when the file is not analysed (skipped or empty)
};

struct LoadedProject {
  PySyntax syntax;
  SourceSet sources;
  std::vector<PyFile> py;           ///< parallel to sources.python
  ProjectIndex index;
  FileStats stats;
  std::vector<FileProblem> problems;
};

struct LoadOptions {
  std::filesystem::path input;
  std::string display_prefix;       ///< basename(input)
  std::vector<std::filesystem::path> exclude;  ///< e.g. the results folder
  std::vector<std::string> env_paths;
  size_t max_file_bytes = 64u << 20;
  /// Methods of torch.nn.Module the target adds that return the module (`model.npu()`).
  std::vector<std::string> module_self_methods = {};
  /// Convert files that declare Latin-1 in a PEP 263 coding line (analyse; migrate skips them).
  bool decode_latin1 = false;
};

/// Loads the project; problems are logged as they are found and kept in `out.problems`.
void LoadProject(const LoadOptions& options, Logger& log, ThreadPool& pool, LoadedProject& out);

}  // namespace portkit::analyse
