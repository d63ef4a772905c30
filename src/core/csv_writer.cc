#include "core/csv_writer.h"

#include <cassert>

namespace portkit {

CsvWriter::CsvWriter(const std::vector<std::string>& header) : columns_(header.size()) { AppendRow(header); }

void CsvWriter::AddRow(const std::vector<std::string>& cells) {
  assert(cells.size() == columns_);
  AppendRow(cells);
  ++rows_;
}

namespace {

// A plain decimal number ("-0.25", "+1e-5", "-inf") cannot be a formula: it keeps its sign.
bool IsNumber(std::string_view s) {
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) s.remove_prefix(1);
  if (s == "inf" || s == "nan") return true;
  bool digits = false, dot = false, exp = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= '0' && c <= '9') digits = true;
    else if (c == '.' && !dot && !exp) dot = true;
    else if ((c == 'e' || c == 'E') && digits && !exp) {
      exp = true;
      digits = false;
      if (i + 1 < s.size() && (s[i + 1] == '-' || s[i + 1] == '+')) ++i;
    } else return false;
  }
  return digits;
}

bool NeedsNeutralising(std::string_view cell) {
  if (cell.empty()) return false;
  char c = cell.front();
  if (c == '=' || c == '@' || c == '%' || c == '\t' || c == '\r') return true;
  return (c == '+' || c == '-') && !IsNumber(cell);
}

}  // namespace

void CsvWriter::AppendCell(std::string& out, std::string_view cell) {
  bool neutralise = NeedsNeutralising(cell);
  if (!neutralise && cell.find_first_of(",\"\n\r") == std::string_view::npos) {
    out.append(cell);  // the common case: no copy, no quoting
    return;
  }
  out += EscapeCell(cell);
}

std::string CsvWriter::EscapeCell(std::string_view cell) {
  std::string value;
  if (NeedsNeutralising(cell)) value.push_back('\'');
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
