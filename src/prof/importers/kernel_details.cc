/// The Ascend PyTorch profiler's `kernel_details.csv` (device tasks of an Ascend profile): one kernel event per
/// row, columns found by name (`Name`, `Type`, `Start Time(us)`, `Duration(us)`, `Stream ID`,
/// `Device_id`, `Block Dim`, `Input Shapes`, `Input Data Types`; `Type`, `Accelerator Core`,
/// `Input Formats`, `Output Shapes`, `Output Data Types`, `Output Formats` as the event's args).
/// Detected by its header, whatever the file is called; plain or gzip.
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <vector>

#include "core/csv_reader.h"
#include "core/input_files.h"
#include "core/json_writer.h"
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

/// Streams the file (plain or gzip) through `parser` in 64 KiB pieces: memory is one row, whatever
/// the file's size (docs/safety.md, Limits); a row is at most limits.max_object_bytes (an
/// unterminated quote would otherwise make one field of the rest of the file) and a gzip file
/// expands at most limits.max_expansion times. `*bytes` counts the uncompressed bytes read.
Status StreamCsv(const std::filesystem::path& path, CsvStreamParser& parser, const CsvStreamParser::RecordFn& on_record,
                 const ImportLimits& limits, uint64_t* bytes) {
  auto fd = OpenInputFile(path);  // regular files only (docs/safety.md)
  if (!fd.ok()) return fd.status();
  struct stat st_disk {};
  uint64_t on_disk = fstat(fd->get(), &st_disk) == 0 ? static_cast<uint64_t>(st_disk.st_size) : 0;
  gzFile f = gzdopen(fd->release(), "rb");
  if (!f) return IoError(path.string() + ": cannot open");
  bool compressed = gzdirect(f) == 0;
  std::vector<char> chunk(size_t{1} << 16);
  int n;
  Status st = Status::Ok();
  while ((n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()))) > 0) {
    *bytes += static_cast<uint64_t>(n);
    st = CheckExpansion(path.string(), compressed, on_disk, *bytes, limits);
    if (!st.ok()) break;
    st = parser.Feed(std::string_view(chunk.data(), static_cast<size_t>(n)), on_record);
    if (!st.ok()) break;
  }
  if (st.ok() && n < 0) {
    int err = 0;
    const char* msg = gzerror(f, &err);
    st = IoError(path.string() + ": cannot read: " + (msg ? msg : "read error"));
  }
  gzclose(f);
  if (!st.ok()) return st;
  return parser.Finish(on_record);
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

  Expected<ImportResult> Import(const std::filesystem::path& file, const std::string& display, Store& store,
                                const ImportLimits& limits) const override {
    const std::string path = file.string();
    ImportResult result;
    result.format = "ascend_pt kernel_details";
    // Rows are stored as they are parsed: the header comes first, then one row at a time.
    std::vector<std::string> header;
    long name = -1, type = -1, start = -1, dur = -1, stream = -1, device = -1, block = -1, shapes = -1, types = -1;
    // Columns kept in the event's args (op_summary and op_statistic read them): msprof's op type,
    // the accelerator core (AI_CORE, AI_VECTOR_CORE, AI_CPU, HCCL, ...), formats and outputs.
    static constexpr const char* kArgColumns[] = {"Type",          "Accelerator Core",  "Input Formats",
                                                  "Output Shapes", "Output Data Types", "Output Formats"};
    std::vector<std::pair<const char*, long>> arg_columns;
    std::string args;
    std::optional<TraceWriter> writer;
    bool out_of_range = false;  // the row in hand has a number out of range (docs/safety.md)
    auto number = [&](const std::string& s) -> int64_t {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(s.c_str(), &end, 10);
      if (end != s.c_str() && errno == ERANGE) out_of_range = true;  // saturated, not the value
      return end == s.c_str() || errno == ERANGE ? -1 : v;
    };
    int64_t duration_sum = 0;
    auto on_row = [&](std::vector<std::string>& row) -> Status {
      if (!writer) {
        header = std::move(row);
        auto col = [&](const char* c) -> long {
          auto it = std::find(header.begin(), header.end(), c);
          return it == header.end() ? -1 : it - header.begin();
        };
        name = col("Name"), type = col("Type"), start = col("Start Time(us)"), dur = col("Duration(us)"),
        stream = col("Stream ID"), device = col("Device_id"), block = col("Block Dim"), shapes = col("Input Shapes"),
        types = col("Input Data Types");
        for (const char* c : kArgColumns)
          if (long at = col(c); at >= 0) arg_columns.emplace_back(c, at);
        if (name < 0 || start < 0 || dur < 0)
          return ParseError(path + ":1: not a kernel_details.csv (needs Name, Start Time(us), Duration(us))");
        auto w = store.BeginTrace(display, result.format);
        if (!w.ok()) return w.status();
        writer.emplace(std::move(*w));
        return Status::Ok();
      }
      if (row.size() != header.size()) {
        ++result.skipped;
        return Status::Ok();
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
        return Status::Ok();
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
      {
        JsonWriter w;
        w.BeginObject();
        for (const auto& [key, at] : arg_columns) {
          const std::string& v = row[static_cast<size_t>(at)];
          if (v.empty() || v == "N/A") continue;
          w.Key(key).String(v);
        }
        w.EndObject();
        args = w.str();
        if (args != "{}") e.args = args;
      }
      if (out_of_range || !TimesInRange(e.ts_ns, e.dur_ns) || e.dur_ns > kMaxTraceDurationSumNs - duration_sum) {
        ++result.skipped;
        ++result.invalid;
        return Status::Ok();
      }
      duration_sum += e.dur_ns;
      PORTKIT_RETURN_IF_ERROR(writer->AddEvent(e));
      ++result.events;
      ++result.per_kind["kernel"];
      return Status::Ok();
    };
    CsvStreamParser parser(path, limits.max_object_bytes);
    // On an error the writer is destroyed unfinished, which rolls the trace back (nothing stored).
    PORTKIT_RETURN_IF_ERROR(StreamCsv(file, parser, on_row, limits, &result.bytes));
    if (!writer) return ParseError(path + ":1: empty file");
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
