#pragma once
/// Tab-separated data files: `#` comment lines, then one record per line.
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace portkit {

/// Every record's fields. Errors name the file and line.
Expected<std::vector<std::vector<std::string>>> ReadTsvRows(const std::filesystem::path& path);

/// `name<TAB>value` records into `out` (value empty when the line has no tab).
Status ReadTsv(const std::filesystem::path& path, std::unordered_map<std::string, std::string>* out);

}  // namespace portkit
