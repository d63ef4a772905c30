#pragma once
/// Loading a project for analysis, shared by the analyse modes: discovery, reading and checking
/// files, parsing each Python file once (in parallel), pass-1 summaries and the project index.
#include <filesystem>
#include <memory>
#include <mutex>
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
  /// The file's text (empty when it was skipped) and, while some pass needs it, its tree: in a
  /// large project only the first files' trees are kept between passes (see keep_tree); TreeOf
  /// parses the others again.
  ParsedSource parsed;
  /// Whether this file's tree is kept from pass 1 to the end of the run (the files, in order,
  /// whose sources fit in LoadOptions::keep_trees_bytes) or parsed again by every pass that
  /// needs it (TreeOf) and dropped after (ReleaseTree).
  bool keep_tree = true;
  ModuleSummary* summary = nullptr;  ///< null when the file is not analysed (skipped or empty)
  /// The single-byte encoding the text was decoded from ("latin-1", "cp1252"; see
  /// LoadPythonSource), empty for UTF-8: a copy that rewrites the file encodes it back.
  std::string codec;
};

struct LoadedProject {
  PySyntax syntax;
  SourceSet sources;
  std::vector<PyFile> py;  ///< parallel to sources.python
  ProjectIndex index;
  FileStats stats;
  std::vector<FileProblem> problems;
  /// Held while a file over kBigTreeSourceBytes is parsed and used: one big tree at a time.
  std::mutex big_tree;
};

/// A file whose tree takes some 70 MB or more is parsed by one worker at a time.
inline constexpr size_t kBigTreeSourceBytes = size_t{1} << 20;

struct LoadOptions {
  std::filesystem::path input;
  std::string display_prefix;                  ///< basename(input)
  std::vector<std::filesystem::path> exclude;  ///< e.g. the results folder
  std::vector<std::string> env_paths;
  size_t max_file_bytes = kDefaultMaxPythonFileBytes;
  /// Methods of torch.nn.Module the target adds that return the module (`model.npu()`).
  std::vector<std::string> module_self_methods = {};
  /// Trees are kept between passes for the files, in order, whose Python sources total at most
  /// this (a tree takes 45-150 times its source: 8 MiB of code, 0.4-1.2 GB of trees); the
  /// other files are parsed again by each pass, one tree per worker at a time. A file past the
  /// budget costs a second parse (about half the time of its analysis).
  size_t keep_trees_bytes = size_t{8} << 20;
  /// Files left out of the project (ExcludedByGlobs): shell globs on paths relative to the input.
  std::vector<std::string> exclude_globs = {};
};

/// Whether `rel` (a '/'-separated path relative to the project folder) is left out by one of
/// `globs`: a glob (fnmatch, `*` also crossing '/') that matches the path, one of its folders
/// (`build`, `tests/*`), or, for a glob without '/', its last component (`*_pb2.py`).
bool ExcludedByGlobs(std::string_view rel, const std::vector<std::string>& globs);

/// Holds LoadedProject::big_tree while a big file's tree exists (a no-op for small files).
class BigTreeGuard {
 public:
  BigTreeGuard(LoadedProject& project, size_t source_bytes);
  ~BigTreeGuard();
  BigTreeGuard(const BigTreeGuard&) = delete;
  BigTreeGuard& operator=(const BigTreeGuard&) = delete;

 private:
  std::mutex* held_ = nullptr;
};

/// The parsed file `f` with its tree: parsed again with `parser` when the project keeps no trees.
/// Null when the file was not loaded (skipped). Call ReleaseTree when done with it.
ParsedSource* TreeOf(LoadedProject& project, PyFile& f, PythonParser& parser);
/// Drops the tree of `f` when the project keeps no trees (its text stays).
void ReleaseTree(LoadedProject& project, PyFile& f);

/// Loads the project; problems are logged as they are found and kept in `out.problems`.
/// Python files that declare Latin-1 or cp1252 in a PEP 263 coding line are decoded to UTF-8
/// (PyFile::codec says from which; migrate and dynamic_shape encode their rewrites back).
void LoadProject(const LoadOptions& options, Logger& log, ThreadPool& pool, LoadedProject& out);

}  // namespace portkit::analyse
