#include "core/table.h"

#include <algorithm>

namespace portkit {
namespace {

size_t DisplayWidth(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;  // count UTF-8 code points
  return w;
}

std::string Centered(const std::string& s, size_t width) {
  size_t w = DisplayWidth(s);
  size_t left = (width - w) / 2;
  return std::string(left, ' ') + s + std::string(width - w - left, ' ');
}

}  // namespace

std::string RenderTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& h : header) widths.push_back(DisplayWidth(h));
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], DisplayWidth(row[i]));
  std::string rule = "+";
  for (size_t w : widths) rule += std::string(w + 2, '-') + "+";
  rule += "\n";
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (size_t i = 0; i < widths.size(); ++i)
      out += " " + Centered(i < cells.size() ? cells[i] : "", widths[i]) + " |";
    return out + "\n";
  };
  std::string out = rule + line(header) + rule;
  for (const auto& row : rows) out += line(row);
  out += rule;
  return out;
}

}  // namespace portkit
