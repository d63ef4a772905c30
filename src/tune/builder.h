#pragma once
/// Builds candidates: writes each source into a cache folder keyed by a hash of source, flags
/// and compiler, and compiles it with the system compiler (through portkit::Spawn) into its own
/// shared object. Builds run in parallel; a cached object is reused; a failing or timed-out
/// compile is a result, not an error.
#include <filesystem>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/status.h"

namespace portkit::tune {

struct BuildOptions {
  std::string compiler = "c++";
  std::vector<std::string> flags = {"-std=c++20", "-O3", "-march=native", "-ffp-contract=fast", "-shared",
                                    "-fPIC",      "-w"};
  std::filesystem::path cache_dir;
  int parallel = 1;           ///< compiler processes at once
  int timeout_seconds = 300;  ///< a compile running longer is killed and the candidate rejected
};

struct BuildResult {
  bool ok = false;
  bool cached = false;
  std::filesystem::path shared_object;
  std::string error;  ///< the compiler's message (first lines) when !ok
  /// The failure is the environment's, not the source's: the source or object could not be
  /// written, the compiler could not be started or was killed by a signal, or its message says
  /// so (no space left, file size limit, quota, read-only file system, out of memory, internal
  /// compiler error). Never recorded as a property of a configuration.
  bool infrastructure = false;
  double seconds = 0;
};

/// Whether a compiler's output names an environment failure rather than an error in the source.
bool LooksLikeInfrastructureFailure(const std::string& compiler_output);

class Builder {
 public:
  Builder(BuildOptions options, Logger& logger);
  /// `compiler --version`'s first line ("" when it cannot be run).
  const std::string& compiler_version() const { return compiler_version_; }
  /// Builds every source (in parallel, options.parallel at once); results in input order.
  std::vector<BuildResult> BuildAll(const std::vector<std::string>& sources);
  /// The cache key: 16 hex digits of FNV-1a over compiler version, the machine (CPU model and
  /// SIMD flags: candidates are built with -march=native), flags and source.
  std::string Key(const std::string& source) const;
  /// Compiles `known_good` afresh (never from the cache) into a private file that is removed
  /// again: "" when it builds, else why not (the compiler's first lines, or the I/O error).
  /// Tells a broken toolchain, a full disk or an unwritable cache from a configuration's own
  /// compile error.
  std::string CheckToolchain(const std::string& known_good);

 private:
  BuildResult BuildOne(const std::string& source, bool use_cache = true);
  /// Removes what killed tuning runs left in the cache (private objects, temporaries).
  void RemoveStaleObjects();
  BuildOptions options_;
  Logger& logger_;
  std::string compiler_version_;
  std::string machine_;
};

}  // namespace portkit::tune
