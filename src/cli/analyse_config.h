#pragma once
/// `portkit analyse`'s configuration file: the `[tool.portkit]` table of a `pyproject.toml` (the
/// analysed project's own, or the file given with --config). Every key is optional; a flag given
/// on the command line wins over the file (docs/analyse.md, "Configuration file").
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace portkit::cli {

/// The settings a `[tool.portkit]` table gives; an absent key is nullopt.
struct AnalyseConfig {
  std::filesystem::path file;  ///< where they came from (empty: no file)
  std::optional<std::vector<std::string>> select, ignore, exclude, format, fail_on, env_path;
  std::optional<std::string> target, version, mode;
  std::optional<int64_t> max_file_mb;
  /// "FILE:LINE:COL" of each key given (by its canonical name: "fail-on"), for later messages.
  std::map<std::string, std::string> places;
  /// "FILE:LINE:COL: unknown key 'tool.portkit.KEY' ..." for each key portkit does not know.
  std::vector<std::string> warnings;
};

/// The keys of `[tool.portkit]`, in the order the docs list them.
const std::vector<std::string>& AnalyseConfigKeys();

/// Reads `[tool.portkit]` from `file`. A file without that table gives an empty config.
/// Errors (kParse, "FILE:LINE:COL: what is wrong"): TOML that does not parse, a key of the wrong
/// type. An unreadable file: kIo / kNotFound naming it.
Expected<AnalyseConfig> ReadAnalyseConfig(const std::filesystem::path& file);

}  // namespace portkit::cli
