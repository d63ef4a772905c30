#include "core/tsv.h"

#include "core/atomic_file.h"

namespace portkit {

Expected<std::vector<std::vector<std::string>>> ReadTsvRows(const std::filesystem::path& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::vector<std::vector<std::string>> rows;
  std::string_view s = *text;
  size_t line_no = 0;
  while (!s.empty()) {
    size_t nl = s.find('\n');
    std::string_view line = s.substr(0, nl);
    s = nl == std::string_view::npos ? std::string_view{} : s.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    if (line.front() == '\t') return ParseError(path.string() + ":" + std::to_string(line_no) + ":1: empty name");
    std::vector<std::string> fields;
    size_t start = 0;
    for (;;) {
      size_t tab = line.find('\t', start);
      fields.emplace_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
    rows.push_back(std::move(fields));
  }
  return rows;
}

Status ReadTsv(const std::filesystem::path& path, std::unordered_map<std::string, std::string>* out) {
  auto rows = ReadTsvRows(path);
  if (!rows.ok()) return rows.status();
  for (auto& r : *rows) (*out)[r[0]] = r.size() > 1 ? r[1] : "";
  return Status::Ok();
}

}  // namespace portkit
