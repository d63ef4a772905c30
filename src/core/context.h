#pragma once
/// Per-run state handed to every command: settings shared by all engines, the logger and the
/// clock. No engine keeps global mutable state; what a run needs travels here.
#include <filesystem>
#include <string>

#include "core/log.h"

namespace portkit {

struct Context {
  Logger& logger;
  Clock clock;
  /// Root of the data files (target tables, rules); see data/README.md.
  std::filesystem::path data_dir;
  /// Worker threads for parallel work; <= 0 means one per core.
  int jobs = 0;
  /// False when the process exits right after the command: big structures (syntax trees) are
  /// then left to the OS instead of being freed one node at a time.
  bool free_memory_at_end = true;
};

/// Finds the data folder: $PORTKIT_DATA_DIR, then `<exe>/../data` (a build inside the source
/// tree), `<exe>/../share/portkit/data` (an installed portkit), then, only for a binary still in
/// its build folder, the source tree's data/ recorded at build time. An installed or copied
/// binary never reads the source tree.
std::filesystem::path FindDataDir();

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
