/// The Ascend PyTorch profiler's `kernel_details.csv` (device tasks of an Ascend profile): one kernel event per
/// row, columns found by name (`Name`, `Type`, `Start Time(us)`, `Duration(us)`, `Stream ID`,
/// `Device_id`, `Block Dim`, `Input Shapes`, `Input Data Types`). Detected by its header, whatever
/// the file is called; plain or gzip.
#include <zlib.h>

#include <algorithm>
#include <cerrno>

#include "core/input_files.h"
#include "core/csv_reader.h"
#include "prof/importers/chrome_trace.h"
#include "prof/importers/importer.h"

namespace portkit::prof {
namespace {

/// The header's column names (the first line, split on commas; quoted names are unquoted).
std::vector<std::string> HeaderColumns(std::string_view head) {
  std::string_view line = head.substr(0, head.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.size() >= 3 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);  // UTF-8 BOM
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    std::string_view col = line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (col.size() >= 2 && col.front() == '"' && col.back() == '"') col = col.substr(1, col.size() - 2);
    out.emplace_back(col);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

Expected<std::string> ReadDecompressed(const std::filesystem::path& path, size_t max_bytes) {
  auto fd = OpenInputFile(path);  // regular files only (docs/safety.md)
  if (!fd.ok()) return fd.status();
  gzFile f = gzdopen(fd->release(), "rb");
  if (!f) return IoError(path.string() + ": cannot open");
  std::string out;
  char chunk[1 << 16];
  int n;
  while ((n = gzread(f, chunk, sizeof chunk)) > 0) {
    out.append(chunk, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      gzclose(f);
      return IoError(path.string() + ": larger than " + std::to_string(max_bytes >> 20) + " MiB");
    }
  }
  int err = 0;
  const char* msg = gzerror(f, &err);
  std::string what = n < 0 && msg ? msg : "";
  gzclose(f);
  if (n < 0) return IoError(path.string() + ": cannot read: " + what);
  return out;
}

class KernelDetailsImporter final : public Importer {
 public:
  std::string_view name() const override { return "kernel_details"; }
  std::string_view description() const override { return "Ascend PyTorch profiler kernel_details.csv"; }

  bool Sniff(std::string_view first_bytes) const override {
    auto cols = HeaderColumns(first_bytes);
    auto has = [&](const char* c) { return std::find(cols.begin(), cols.end(), c) != cols.end(); };
    return has("Name") && has("Start Time(us)") && has("Duration(us)");
  }

  Expected<ImportResult> Import(const std::filesystem::path& file, const std::string& display,
                                Store& store) const override {
    const std::string path = file.string();
    auto text = ReadDecompressed(file, size_t{4096} << 20);
    if (!text.ok()) return text.status();
    auto rows = ParseCsv(*text, path);
    if (!rows.ok()) return rows.status();
    ImportResult result;
    result.format = "ascend_pt kernel_details";
    result.bytes = text->size();
    if (rows->empty()) return ParseError(path + ":1: empty file");
    const auto& header = rows->front();
    auto col = [&](const char* name) -> long {
      auto it = std::find(header.begin(), header.end(), name);
      return it == header.end() ? -1 : it - header.begin();
    };
    long name = col("Name"), type = col("Type"), start = col("Start Time(us)"), dur = col("Duration(us)"),
         stream = col("Stream ID"), device = col("Device_id"), block = col("Block Dim"),
         shapes = col("Input Shapes"), types = col("Input Data Types");
    if (name < 0 || start < 0 || dur < 0)
      return ParseError(path + ":1: not a kernel_details.csv (needs Name, Start Time(us), Duration(us))");
    auto writer = store.BeginTrace(display, result.format);
    if (!writer.ok()) return writer.status();
    bool out_of_range = false;  // the row in hand has a number out of range (docs/safety.md)
    auto number = [&](const std::string& s) -> int64_t {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(s.c_str(), &end, 10);
      if (end != s.c_str() && errno == ERANGE) out_of_range = true;  // saturated, not the value
      return end == s.c_str() || errno == ERANGE ? -1 : v;
    };
    int64_t duration_sum = 0;
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
      out_of_range = false;
      if (!ParseMicrosToNanos(row[static_cast<size_t>(start)], &e.ts_ns, &out_of_range) ||
          !ParseMicrosToNanos(row[static_cast<size_t>(dur)], &e.dur_ns, &out_of_range)) {
        ++result.skipped;
        if (out_of_range) ++result.invalid;
        continue;
      }
      e.pid = device >= 0 ? std::max<int64_t>(0, number(row[static_cast<size_t>(device)])) : 0;
      e.tid = stream >= 0 ? number(row[static_cast<size_t>(stream)]) : -1;
      if (block >= 0) {  // Block Dim: one dimension (Block Num = x·1·1)
        e.grid[0] = number(row[static_cast<size_t>(block)]);
        if (e.grid[0] >= 0) e.grid[1] = e.grid[2] = 1;
      }
      std::string dims = shapes >= 0 ? row[static_cast<size_t>(shapes)] : "";
      if (dims != "N/A") e.input_dims = dims;
      if (types >= 0 && row[static_cast<size_t>(types)] != "N/A") e.input_types = row[static_cast<size_t>(types)];
      if (out_of_range || !TimesInRange(e.ts_ns, e.dur_ns) || e.dur_ns > kMaxTraceDurationSumNs - duration_sum) {
        ++result.skipped;
        ++result.invalid;
        continue;
      }
      duration_sum += e.dur_ns;
      PORTKIT_RETURN_IF_ERROR(writer->AddEvent(e));
      ++result.events;
      ++result.per_kind["kernel"];
    }
    if (result.skipped)
      result.warning = std::to_string(result.skipped) + " rows with missing or malformed fields skipped";
    if (result.invalid)
      result.warning += " (" + std::to_string(result.invalid) +
                        " of them with a time, duration or number out of range: durations 0 to 1e14 ns, "
                        "timestamps up to 4e18 ns)";
    PORTKIT_RETURN_IF_ERROR(writer->Finish(result.events, result.skipped, result.warning));
    return result;
  }
};

}  // namespace

std::unique_ptr<Importer> MakeKernelDetailsImporter() { return std::make_unique<KernelDetailsImporter>(); }

}  // namespace portkit::prof
