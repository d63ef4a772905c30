#include "core/csv_reader.h"

#include <filesystem>

#include "core/atomic_file.h"

namespace portkit {

Expected<CsvRows> ParseCsv(std::string_view text, const std::string& path) {
  CsvRows rows;
  std::vector<std::string> row;
  std::string field;
  size_t line = 1, record_line = 1;
  bool in_quotes = false, quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field.push_back('"');
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field.push_back(c);
      }
      continue;
    }
    if (c == '"') {
      if (!field.empty() || quoted)
        return ParseError(path + ":" + std::to_string(line) + ": unexpected quote inside a field");
      in_quotes = quoted = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      quoted = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      row.push_back(std::move(field));
      field.clear();
      quoted = false;
      rows.push_back(std::move(row));
      row.clear();
      record_line = ++line;
    } else {
      if (quoted)
        return ParseError(path + ":" + std::to_string(line) + ": text after a closing quote");
      field.push_back(c);
    }
  }
  if (in_quotes)
    return ParseError(path + ":" + std::to_string(record_line) + ": unterminated quoted field");
  if (!field.empty() || !row.empty() || quoted) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  return rows;
}

Expected<CsvRows> ReadCsvFile(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return IoError(path + ": cannot read: " + ec.message());
  if (size > max_bytes)
    return InvalidArgument(path + ": " + std::to_string(size >> 20) + " MiB is larger than the " +
                           std::to_string(max_bytes >> 20) + " MiB a results CSV may have");
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseCsv(*text, path);
}

}  // namespace portkit
