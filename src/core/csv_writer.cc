#include "core/csv_writer.h"

#include <cassert>

namespace portkit {

CsvWriter::CsvWriter(const std::vector<std::string>& header) : columns_(header.size()) {
  AppendRow(header);
}

void CsvWriter::AddRow(const std::vector<std::string>& cells) {
  assert(cells.size() == columns_);
  AppendRow(cells);
  ++rows_;
}

void CsvWriter::AppendCell(std::string& out, std::string_view cell) {
  bool neutralise = false;
  if (!cell.empty()) {
    char c = cell.front();
    neutralise = c == '=' || c == '+' || c == '-' || c == '@' || c == '%' || c == '\t' || c == '\r';
  }
  if (!neutralise && cell.find_first_of(",\"\n\r") == std::string_view::npos) {
    out.append(cell);  // the common case: no copy, no quoting
    return;
  }
  out += EscapeCell(cell);
}

std::string CsvWriter::EscapeCell(std::string_view cell) {
  std::string value;
  if (!cell.empty()) {
    char c = cell.front();
    if (c == '=' || c == '+' || c == '-' || c == '@' || c == '%' || c == '\t' || c == '\r') {
      value.push_back('\'');
    }
  }
  value.append(cell);
  bool quote = value.find_first_of(",\"\n\r") != std::string::npos;
  if (!quote) return value;
  std::string quoted = "\"";
  for (char c : value) {
    if (c == '"') quoted.push_back('"');
    quoted.push_back(c);
  }
  quoted.push_back('"');
  return quoted;
}

void CsvWriter::AppendRow(const std::vector<std::string>& cells) {
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i) out_.push_back(',');
    AppendCell(out_, cells[i]);
  }
  out_.push_back('\n');
}

}  // namespace portkit
