#pragma once
/// Per-run state handed to every command: settings shared by all engines, the logger and the
/// clock. No engine keeps global mutable state; what a run needs travels here.
#include <filesystem>
#include <string>
#include <vector>

#include "core/log.h"

namespace portkit {

/// The data folders (target tables, rules; see data/README.md), searched in order: the folders of
/// $PORTKIT_DATA_DIR (colon-separated) laid over the shipped data, which comes last. A file is read
/// from the first folder that holds it, so a folder holding only `targets/<mine>/target.json` adds
/// a target and takes everything else from the shipped data; a target folder of the same name in
/// an earlier folder hides a later one.
class DataDirs {
 public:
  DataDirs() = default;
  DataDirs(std::filesystem::path dir) : dirs_{std::move(dir)} {}              // NOLINT: one folder
  DataDirs(const char* dir) : DataDirs(std::filesystem::path(dir)) {}         // NOLINT
  DataDirs(const std::string& dir) : DataDirs(std::filesystem::path(dir)) {}  // NOLINT
  explicit DataDirs(std::vector<std::filesystem::path> dirs) : dirs_(std::move(dirs)) {}

  /// The folders, first searched first.
  const std::vector<std::filesystem::path>& dirs() const { return dirs_; }
  /// `rel` in the first folder that holds it; else in the last one (the shipped data), so that a
  /// message about a missing file names where it is expected.
  std::filesystem::path Find(const std::filesystem::path& rel) const;
  /// The last folder: the shipped data (empty when there is none).
  const std::filesystem::path& shipped() const { return dirs_.empty() ? none_ : dirs_.back(); }
  /// For readers of one folder: the first folder that is a whole data folder (it holds
  /// cuda/cuda_only.json: a full copy named by $PORTKIT_DATA_DIR), else the shipped data.
  const std::filesystem::path& primary() const;
  operator const std::filesystem::path&() const { return primary(); }  // NOLINT
  /// The folders joined by ':' (for messages).
  std::string Describe() const;

 private:
  std::vector<std::filesystem::path> dirs_;
  std::filesystem::path none_;
};

struct Context {
  Logger& logger;
  Clock clock;
  /// The data folders (target tables, rules): $PORTKIT_DATA_DIR over the shipped data.
  DataDirs data_dir;
  /// Worker threads for parallel work; <= 0 means one per core.
  int jobs = 0;
  /// False when the process exits right after the command: big structures (syntax trees) are
  /// then left to the OS instead of being freed one node at a time.
  bool free_memory_at_end = true;
};

/// Finds the data folders: the folders of $PORTKIT_DATA_DIR (colon-separated, empty entries
/// skipped), then the shipped data: `<exe>/../data` (a build inside the source tree),
/// `<exe>/../share/portkit/data` (an installed portkit), then, only for a binary still in its
/// build folder, the source tree's data/ recorded at build time. An installed or copied binary
/// never reads the source tree.
DataDirs FindDataDir();

/// Finds the Python companion: the folder that holds the `portkit` package (what goes on
/// PYTHONPATH). $PORTKIT_PYTHON_DIR, then `<exe>/../python` (a build inside the source tree),
/// `<exe>/../share/portkit/python` (an installed portkit), then, only for a binary still in its
/// build folder, the source tree's python/. Empty when none holds `portkit/__init__.py` (the
/// companion may still be pip-installed in the interpreter the user runs).
std::filesystem::path FindPythonDir();

/// The `PYTHONPATH=...` entry for a child running the companion: FindPythonDir() first, then the
/// caller's own PYTHONPATH; empty when both are empty (the interpreter's pip-installed portkit).
std::string CompanionPythonPathEnv();

}  // namespace portkit
