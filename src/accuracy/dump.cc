#include "accuracy/dump.h"
#include "accuracy/msprobe_dump.h"
#include "core/atomic_file.h"
#include "core/input_files.h"

#include <simdjson.h>

#include <cmath>
#include <fstream>
#include <optional>

namespace portkit::accuracy {
namespace {

/// A statistic: a JSON number, or "nan" / "inf" / "-inf" (JSON has no non-finite numbers).
bool StatValue(simdjson::ondemand::value& v, double& out) {
  if (!v.get_double().get(out)) return true;
  std::string_view s;
  if (v.get_string().get(s)) return false;
  if (s == "nan") out = NAN;
  else if (s == "inf") out = INFINITY;
  else if (s == "-inf") out = -INFINITY;
  else return false;
  return true;
}

/// One field of a tensor of a manifest record into `dt`; a field of another type is ignored.
void ReadTensorField(std::string_view tk, simdjson::ondemand::value& tv, DumpTensor& dt) {
  std::string_view ts;
  double x;
  if (tk == "key" && !tv.get_string().get(ts)) dt.key = ts;
  else if (tk == "dtype" && !tv.get_string().get(ts)) dt.dtype = ts;
  else if (tk == "shape") {
    simdjson::ondemand::array sa;
    if (!tv.get_array().get(sa))
      for (auto e : sa) {
        int64_t dim;
        if (!e.get_int64().get(dim)) dt.shape.push_back(dim);
      }
  } else if (tk == "max" && StatValue(tv, x)) dt.max = x, dt.has_stats = true;
  else if (tk == "min" && StatValue(tv, x)) dt.min = x;
  else if (tk == "mean" && StatValue(tv, x)) dt.mean = x;
  else if (tk == "norm" && StatValue(tv, x)) dt.norm = x;
  else if (tk == "note" && !tv.get_string().get(ts)) dt.note = ts;
  else if (tk == "data_name" && !tv.get_string().get(ts)) dt.data_name = ts;
  else if (tk == "requires_grad") {
    bool b;
    if (!tv.get_bool().get(b)) dt.requires_grad = b ? 1 : 0;
  } else if (tk == "nan" || tk == "inf") {
    int64_t c;
    if (!tv.get_int64().get(c)) (tk == "nan" ? dt.nan : dt.inf) = c;
  } else if (tk == "crc32") {
    uint64_t c;
    if (!tv.get_uint64().get(c)) dt.crc32 = static_cast<int64_t>(c);
  }
}

/// One entry of a record's "tensors"; the fields after one that cannot be read are left out.
DumpTensor ReadTensor(simdjson::ondemand::object& t) {
  DumpTensor dt;
  for (auto tf : t) {
    std::string_view tk;
    if (tf.unescaped_key().get(tk)) break;
    simdjson::ondemand::value tv;
    if (tf.value().get(tv)) break;
    ReadTensorField(tk, tv, dt);
  }
  return dt;
}

/// A record's "replay" object: its status and reference_index.
void ReadReplay(simdjson::ondemand::value& v, DumpOp& op) {
  simdjson::ondemand::object r;
  if (v.get_object().get(r)) return;
  for (auto rf : r) {
    std::string_view rk, rs;
    if (rf.unescaped_key().get(rk)) break;
    if (rk == "status" && !rf.value().get_string().get(rs)) op.replay_status = rs;
    else if (rk == "reference_index") {
      int64_t ri;
      if (!rf.value().get_int64().get(ri)) op.replay_reference = ri;
    }
  }
}

/// The manifest's `forward` object ({"index", "name", "node"}) as `aten::mul #12 (MulBackward0)`.
void ReadForward(simdjson::ondemand::value& v, DumpOp& op) {
  simdjson::ondemand::object r;
  if (v.get_object().get(r)) return;
  std::string name, node, index;
  for (auto rf : r) {
    std::string_view rk, rs;
    if (rf.unescaped_key().get(rk)) return;
    if (rk == "name" && !rf.value().get_string().get(rs)) name = rs;
    else if (rk == "node" && !rf.value().get_string().get(rs)) node = rs;
    else if (rk == "index") {
      int64_t i;
      if (!rf.value().get_int64().get(i)) index = std::to_string(i);
    }
  }
  if (name.empty() && node.empty()) return;
  op.forward =
      name.empty() ? node : name + (index.empty() ? "" : " #" + index) + (node.empty() ? "" : " (" + node + ")");
}

/// How reading one field of a record went.
enum class FieldRead {
  kOk,
  kBad,   ///< the record is damaged; its other fields are still read
  kStop,  ///< the record is damaged and the rest of it cannot be read
};

/// A record's "tensors" array into `op.tensors`, through `scratch` (empty before and after).
FieldRead ReadTensors(simdjson::ondemand::value& v, DumpOp& op, std::vector<DumpTensor>& scratch) {
  simdjson::ondemand::array arr;
  if (v.get_array().get(arr)) return FieldRead::kStop;
  FieldRead read = FieldRead::kOk;
  for (auto item : arr) {
    simdjson::ondemand::object t;
    if (item.get_object().get(t)) {
      read = FieldRead::kBad;
      break;
    }
    scratch.push_back(ReadTensor(t));
  }
  // One allocation of the exact size per operator (no outgrown blocks left between the
  // records: freed later, an operator's records then make whole free pages).
  op.tensors.reserve(scratch.size());
  std::move(scratch.begin(), scratch.end(), std::back_inserter(op.tensors));
  scratch.clear();
  return read;
}

/// One field of a manifest record into `op`; an unknown field, or a known one of another type, is
/// ignored.
FieldRead ReadOpField(std::string_view k, simdjson::ondemand::value& v, DumpOp& op, std::vector<DumpTensor>& scratch) {
  std::string_view s;
  if (k == "index") return v.get_int64().get(op.index) ? FieldRead::kBad : FieldRead::kOk;
  if (k == "name" && !v.get_string().get(s)) op.name = s;
  else if (k == "kind" && !v.get_string().get(s)) op.kind = s;
  else if (k == "phase" && !v.get_string().get(s)) op.phase = s;
  else if (k == "module" && !v.get_string().get(s)) op.module = s;
  else if (k == "stack" && !v.get_string().get(s)) op.stack = s;
  else if (k == "call" && !v.get_string().get(s)) op.call = s;
  else if (k == "file" && !v.get_string().get(s)) {
    op.file = s;
    // A tensor file is a name inside the dump folder, never a path out of it.
    if (op.file.find_first_of("/\\") != std::string::npos || op.file == ".." || op.file == ".") return FieldRead::kBad;
  } else if (k == "overflow") {
    bool b;
    if (!v.get_bool().get(b)) op.overflow = b;
  } else if (k == "replay") ReadReplay(v, op);
  else if (k == "forward") ReadForward(v, op);
  else if (k == "tensors") return ReadTensors(v, op, scratch);
  return FieldRead::kOk;
}

/// One line of manifest.jsonl into `op` (replaced); false when it is not a whole record.
bool ReadRecord(simdjson::ondemand::parser& parser, const std::string& line, DumpOp& op,
                std::vector<DumpTensor>& scratch) {
  simdjson::padded_string json(line);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  op = DumpOp();
  if (parser.iterate(json).get(doc) || doc.get_object().get(obj)) return false;
  bool bad = false;
  for (auto f : obj) {
    std::string_view k;
    simdjson::ondemand::value v;
    if (f.unescaped_key().get(k) || f.value().get(v)) return false;
    const FieldRead read = ReadOpField(k, v, op, scratch);
    if (read == FieldRead::kStop) return false;
    bad |= read == FieldRead::kBad;
  }
  return !bad;
}

/// Whether the end-of-dump marker of `dir` (written last by the dumper) is there and counts
/// `count` records; if not, `why` says what is wrong (e.g. the dump was cut short).
bool CheckEndMarker(const std::filesystem::path& dir, size_t count, simdjson::ondemand::parser& parser,
                    std::string* why) {
  const std::filesystem::path end = dir / kDumpEndMarker;
  if (DescribeFileType(end) == "missing") {
    *why = "no end-of-dump marker (" + std::string(kDumpEndMarker) +
           "): the run that wrote it did not finish (killed or crashed?); it may be truncated";
    return false;
  }
  auto text = ReadFile(end);
  if (!text.ok()) {
    *why = text.status().message();
    return false;
  }
  simdjson::padded_string json(*text);
  simdjson::ondemand::document doc;
  int64_t records = -1;
  if (parser.iterate(json).get(doc) || doc["records"].get_int64().get(records) || records < 0) {
    *why = "a damaged end-of-dump marker (" + std::string(kDumpEndMarker) + "); it may be truncated";
    return false;
  }
  if (static_cast<uint64_t>(records) != count) {
    *why = "truncated: its end-of-dump marker counts " + std::to_string(records) + " operators, the manifest holds " +
           std::to_string(count);
    return false;
  }
  return true;
}

}  // namespace

bool DumpTensor::NonFinite() const {
  if (nan >= 0 || inf >= 0) return nan > 0 || inf > 0;
  return has_stats && (!std::isfinite(max) || !std::isfinite(min) || !std::isfinite(mean));
}

struct DumpReader::State {
  std::filesystem::path dir, manifest;
  std::ifstream in;
  size_t line_no = 0, count = 0;
  simdjson::ondemand::parser parser;
  std::string line;
  std::vector<DumpTensor> tensors;  // one operator's, reused
  std::string warning;
  bool complete = false, done = false;
  // An msprobe dump: read as a stream, one call at a time.
  std::optional<MsprobeDumpReader> msprobe;

  Expected<bool> NextMsprobe(DumpOp& op);
  Expected<bool> NextRecord(DumpOp& op);
  /// At the end of the manifest: complete, or a warning saying why not.
  void Finish();
};

Expected<bool> DumpReader::State::NextMsprobe(DumpOp& op) {
  if (done) return false;
  auto more = msprobe->Next(op);
  if (!more.ok()) return more.status();
  if (*more) {
    ++count;
    return true;
  }
  done = true;
  warning = msprobe->warning();
  return false;
}

Expected<bool> DumpReader::State::NextRecord(DumpOp& op) {
  if (done) return false;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (ReadRecord(parser, line, op, tensors)) {
      ++count;
      return true;
    }
    // Only the last line may be cut by a crash; anything else is a damaged manifest.
    if (in.peek() != EOF)
      return ParseError(manifest.string() + ":" + std::to_string(line_no) + ": not a manifest record");
    warning = manifest.string() + ":" + std::to_string(line_no) + ": incomplete last record ignored";
    break;
  }
  done = true;
  Finish();
  return false;
}

void DumpReader::State::Finish() {
  // The end-of-dump marker (written last by the dumper): absent, or counting other records than
  // the manifest holds, means the dump was cut short.
  std::string why;
  if (CheckEndMarker(dir, count, parser, &why)) complete = true;
  if (!why.empty()) {
    std::string note = dir.string() + ": " + why;
    warning = warning.empty() ? note : warning + "; " + note;
  }
}

DumpReader::DumpReader(std::unique_ptr<State> state) : s_(std::move(state)) {}
DumpReader::DumpReader(DumpReader&&) noexcept = default;
DumpReader& DumpReader::operator=(DumpReader&&) noexcept = default;
DumpReader::~DumpReader() = default;
const std::filesystem::path& DumpReader::dir() const { return s_->dir; }
const std::string& DumpReader::warning() const { return s_->warning; }
bool DumpReader::complete() const { return s_->complete; }
size_t DumpReader::count() const { return s_->count; }

Expected<DumpReader> DumpReader::Open(const std::filesystem::path& dir, uint64_t max_call_bytes) {
  auto s = std::make_unique<State>();
  s->dir = dir;
  if (IsMsprobeDump(dir)) {
    auto reader = MsprobeDumpReader::Open(dir, max_call_bytes);
    if (!reader.ok()) return reader.status();
    s->msprobe.emplace(std::move(*reader));
    return DumpReader(std::move(s));
  }
  s->manifest = dir / "manifest.jsonl";
  // A manifest that is a FIFO or device would block the read forever; a link is not followed.
  if (auto probe = OpenInputFile(s->manifest, Links::kRefuse);
      !probe.ok() && DescribeFileType(s->manifest) != "missing")
    return probe.status();
  s->in.open(s->manifest);
  if (!s->in)
    return NotFound(s->manifest.string() +
                    ": no manifest; give a folder written by portkit.torch.dumper, or an "
                    "msprobe step/rank folder holding dump.json");
  return DumpReader(std::move(s));
}

Expected<bool> DumpReader::Next(DumpOp& op) {
  if (s_->msprobe) return s_->NextMsprobe(op);
  return s_->NextRecord(op);
}

Expected<Dump> Dump::Load(const std::filesystem::path& dir) {
  auto reader = DumpReader::Open(dir);
  if (!reader.ok()) return reader.status();
  Dump d;
  d.dir = dir;
  PORTKIT_RETURN_IF_ERROR(ReadAllOps(*reader, d));
  d.complete = reader->complete();
  return d;
}

}  // namespace portkit::accuracy
