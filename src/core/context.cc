#include "core/context.h"

#include <unistd.h>

#include <cstdlib>
#include <system_error>

#ifndef PORTKIT_SOURCE_DIR
#define PORTKIT_SOURCE_DIR ""
#endif
#ifndef PORTKIT_BUILD_DIR
#define PORTKIT_BUILD_DIR ""
#endif

namespace portkit {
namespace {

namespace fs = std::filesystem;

/// The running executable's path (empty if /proc is unavailable).
fs::path ExePath() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

/// True when `exe` lies inside the build folder it was compiled in (then, and only then, the
/// source tree recorded at build time may be used as a last resort).
bool InBuildTree(const fs::path& exe) {
  const fs::path build(PORTKIT_BUILD_DIR);
  if (build.empty() || exe.empty()) return false;
  fs::path rel = exe.lexically_normal().lexically_relative(build.lexically_normal());
  return !rel.empty() && *rel.begin() != "..";
}

/// The first of `<exe>/../<in_tree>`, `<exe>/../share/portkit/<in_tree>`, `<source>/<in_tree>`
/// (build-folder binaries only) for which `marker` exists below it.
fs::path FindBeside(const char* env_name, const fs::path& in_tree, const fs::path& marker) {
  std::error_code ec;
  if (const char* env = std::getenv(env_name); env && *env) return fs::path(env);
  fs::path exe = ExePath();
  if (!exe.empty()) {
    fs::path prefix = exe.parent_path().parent_path();
    for (const fs::path& candidate : {prefix / in_tree, prefix / "share" / "portkit" / in_tree}) {
      if (fs::exists(candidate / marker, ec)) return candidate;
    }
  }
  fs::path source(PORTKIT_SOURCE_DIR);
  if (!source.empty() && InBuildTree(exe) && fs::exists(source / in_tree / marker, ec)) return source / in_tree;
  return fs::path();
}

}  // namespace

fs::path FindDataDir() {
  fs::path found = FindBeside("PORTKIT_DATA_DIR", "data", "targets");
  if (!found.empty()) return found;
  // Nothing found: name where an installed portkit keeps it, so errors point somewhere useful.
  fs::path exe = ExePath();
  return exe.empty() ? fs::path("data") : exe.parent_path().parent_path() / "share" / "portkit" / "data";
}

fs::path FindPythonDir() { return FindBeside("PORTKIT_PYTHON_DIR", "python", fs::path("portkit") / "__init__.py"); }

std::string CompanionPythonPathEnv() {
  std::string pythonpath = FindPythonDir().string();
  const char* old_path = std::getenv("PYTHONPATH");
  if (old_path && *old_path) pythonpath += (pythonpath.empty() ? "" : ":") + std::string(old_path);
  return pythonpath.empty() ? std::string() : "PYTHONPATH=" + pythonpath;
}

}  // namespace portkit
