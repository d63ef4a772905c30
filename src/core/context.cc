#include "core/context.h"

#include <unistd.h>

#include <cstdlib>
#include <system_error>

#ifndef PORTKIT_SOURCE_DATA_DIR
#define PORTKIT_SOURCE_DATA_DIR ""
#endif

namespace portkit {

std::filesystem::path FindDataDir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const char* env = std::getenv("PORTKIT_DATA_DIR"); env && *env) return fs::path(env);
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path candidate : {exe.parent_path().parent_path() / "data",
                               exe.parent_path().parent_path() / "share/portkit/data"}) {
      if (fs::is_directory(candidate / "targets", ec)) return candidate;
    }
  }
  return fs::path(PORTKIT_SOURCE_DATA_DIR);
}

}  // namespace portkit
