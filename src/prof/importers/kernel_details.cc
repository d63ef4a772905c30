#include "prof/importers/kernel_details.h"

#include <algorithm>
#include <fstream>

#include "core/csv_reader.h"

namespace portkit::prof {

bool SniffKernelDetails(const std::string& path) {
  std::ifstream in(path);
  std::string header;
  if (!std::getline(in, header)) return false;
  return header.find("Start Time(us)") != std::string::npos && header.find("Duration(us)") != std::string::npos &&
         header.find("Name") != std::string::npos;
}

Expected<ImportResult> ImportKernelDetails(const std::string& path, const std::string& display, Store& store) {
  auto rows = ReadCsvFile(path, size_t{4096} << 20);
  if (!rows.ok()) return rows.status();
  ImportResult result;
  result.format = "torch_npu kernel_details";
  if (rows->empty()) return ParseError(path + ":1: empty file");
  const auto& header = rows->front();
  auto col = [&](const char* name) -> long {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : it - header.begin();
  };
  long name = col("Name"), type = col("Type"), start = col("Start Time(us)"), dur = col("Duration(us)"),
       stream = col("Stream ID"), device = col("Device_id"), block = col("Block Dim"), shapes = col("Input Shapes"),
       types = col("Input Data Types");
  if (name < 0 || start < 0 || dur < 0)
    return ParseError(path + ":1: not a kernel_details.csv (needs Name, Start Time(us), Duration(us))");
  auto trace = store.BeginTrace(display, result.format);
  if (!trace.ok()) return trace.status();
  auto number = [](const std::string& s) -> int64_t {
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    return end == s.c_str() ? -1 : v;
  };
  for (size_t r = 1; r < rows->size(); ++r) {
    const auto& row = (*rows)[r];
    if (row.size() != header.size()) {
      ++result.skipped;
      continue;
    }
    Event e;
    e.kind = EventKind::kKernel;
    e.name = row[static_cast<size_t>(name)];
    e.category = type >= 0 ? std::string_view(row[static_cast<size_t>(type)]) : std::string_view("kernel");
    if (!ParseMicrosToNanos(row[static_cast<size_t>(start)], &e.ts_ns) ||
        !ParseMicrosToNanos(row[static_cast<size_t>(dur)], &e.dur_ns)) {
      ++result.skipped;
      continue;
    }
    e.pid = device >= 0 ? std::max<int64_t>(0, number(row[static_cast<size_t>(device)])) : 0;
    e.tid = stream >= 0 ? number(row[static_cast<size_t>(stream)]) : -1;
    if (block >= 0) e.grid[0] = number(row[static_cast<size_t>(block)]);
    std::string dims = shapes >= 0 ? row[static_cast<size_t>(shapes)] : "";
    if (dims != "N/A") e.input_dims = dims;
    if (types >= 0 && row[static_cast<size_t>(types)] != "N/A") e.input_types = row[static_cast<size_t>(types)];
    PORTKIT_RETURN_IF_ERROR(store.AddEvent(*trace, e));
    ++result.events;
    ++result.per_kind["kernel"];
  }
  if (result.skipped) result.warning = std::to_string(result.skipped) + " rows with missing or malformed fields skipped";
  PORTKIT_RETURN_IF_ERROR(store.EndTrace(*trace, result.events, result.skipped, result.warning));
  return result;
}

}  // namespace portkit::prof
