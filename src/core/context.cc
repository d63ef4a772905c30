#include "core/context.h"

#include <unistd.h>

#include <cstdlib>
#include <string_view>
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
  if (const char* env = env_name ? std::getenv(env_name) : nullptr; env && *env) return fs::path(env);
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

fs::path DataDirs::Find(const fs::path& rel) const {
  std::error_code ec;
  for (const auto& dir : dirs_)
    if (fs::exists(dir / rel, ec)) return dir / rel;
  return shipped() / rel;
}

const fs::path& DataDirs::primary() const {
  std::error_code ec;
  for (const auto& dir : dirs_)
    if (fs::exists(dir / "cuda" / "cuda_only.json", ec)) return dir;
  return shipped();
}

std::string DataDirs::Describe() const {
  std::string out;
  for (const auto& dir : dirs_) out += (out.empty() ? "" : ":") + dir.string();
  return out;
}

DataDirs FindDataDir() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("PORTKIT_DATA_DIR"); env && *env) {
    std::string_view list(env);
    for (size_t start = 0; start <= list.size();) {
      size_t colon = list.find(':', start);
      if (colon == std::string_view::npos) colon = list.size();
      if (colon > start) dirs.emplace_back(std::string(list.substr(start, colon - start)));
      start = colon + 1;
    }
  }
  fs::path shipped = FindBeside(nullptr, "data", "targets");
  // Nothing found: name where an installed portkit keeps it, so errors point somewhere useful.
  if (shipped.empty()) {
    fs::path exe = ExePath();
    shipped = exe.empty() ? fs::path("data") : exe.parent_path().parent_path() / "share" / "portkit" / "data";
  }
  // A folder named twice (PORTKIT_DATA_DIR naming the shipped data itself) is searched once.
  std::error_code ec;
  bool listed = false;
  for (const auto& d : dirs) listed |= fs::equivalent(d, shipped, ec);
  if (!listed) dirs.push_back(shipped);
  return DataDirs(std::move(dirs));
}

fs::path FindPythonDir() { return FindBeside("PORTKIT_PYTHON_DIR", "python", fs::path("portkit") / "__init__.py"); }

std::string CompanionPythonPathEnv() {
  std::string pythonpath = FindPythonDir().string();
  const char* old_path = std::getenv("PYTHONPATH");
  if (old_path && *old_path) pythonpath += (pythonpath.empty() ? "" : ":") + std::string(old_path);
  return pythonpath.empty() ? std::string() : "PYTHONPATH=" + pythonpath;
}

}  // namespace portkit
