#pragma once
/// RFC 4180 CSV reading (quoted fields, doubled quotes, newlines inside quotes).
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace portkit {

using CsvRows = std::vector<std::vector<std::string>>;

/// Parses `text`; errors read `path:line: what` (line of the record that is wrong).
Expected<CsvRows> ParseCsv(std::string_view text, const std::string& path);

/// Reads and parses a CSV file no larger than `max_bytes`.
Expected<CsvRows> ReadCsvFile(const std::string& path, size_t max_bytes);

}  // namespace portkit
