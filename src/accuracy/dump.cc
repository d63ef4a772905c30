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
};

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
  State& st = *s_;
  if (st.msprobe) {
    if (st.done) return false;
    auto more = st.msprobe->Next(op);
    if (!more.ok()) return more.status();
    if (*more) {
      ++st.count;
      return true;
    }
    st.done = true;
    st.warning = st.msprobe->warning();
    return false;
  }
  if (st.done) return false;
  auto& in = st.in;
  auto& parser = st.parser;
  auto& tensors = st.tensors;
  const std::filesystem::path& manifest = st.manifest;
  while (std::getline(in, st.line)) {
    ++st.line_no;
    if (st.line.empty()) continue;
    simdjson::padded_string json(st.line);
    simdjson::ondemand::document doc;
    simdjson::ondemand::object obj;
    op = DumpOp();
    bool bad = parser.iterate(json).get(doc) || doc.get_object().get(obj);
    if (!bad) {
      for (auto f : obj) {
        std::string_view k;
        if (f.unescaped_key().get(k)) {
          bad = true;
          break;
        }
        simdjson::ondemand::value v;
        if (f.value().get(v)) {
          bad = true;
          break;
        }
        std::string_view s;
        if (k == "index") bad |= static_cast<bool>(v.get_int64().get(op.index));
        else if (k == "name" && !v.get_string().get(s)) op.name = s;
        else if (k == "kind" && !v.get_string().get(s)) op.kind = s;
        else if (k == "phase" && !v.get_string().get(s)) op.phase = s;
        else if (k == "module" && !v.get_string().get(s)) op.module = s;
        else if (k == "stack" && !v.get_string().get(s)) op.stack = s;
        else if (k == "call" && !v.get_string().get(s)) op.call = s;
        else if (k == "file" && !v.get_string().get(s)) {
          op.file = s;
          // A tensor file is a name inside the dump folder, never a path out of it.
          bad |= op.file.find_first_of("/\\") != std::string::npos || op.file == ".." || op.file == ".";
        } else if (k == "overflow") {
          bool b;
          if (!v.get_bool().get(b)) op.overflow = b;
        } else if (k == "replay") {
          simdjson::ondemand::object r;
          if (!v.get_object().get(r))
            for (auto rf : r) {
              std::string_view rk, rs;
              if (rf.unescaped_key().get(rk)) break;
              if (rk == "status" && !rf.value().get_string().get(rs)) op.replay_status = rs;
              else if (rk == "reference_index") {
                int64_t ri;
                if (!rf.value().get_int64().get(ri)) op.replay_reference = ri;
              }
            }
        } else if (k == "tensors") {
          simdjson::ondemand::array arr;
          if (v.get_array().get(arr)) {
            bad = true;
            break;
          }
          for (auto item : arr) {
            simdjson::ondemand::object t;
            if (item.get_object().get(t)) {
              bad = true;
              break;
            }
            DumpTensor dt;
            for (auto tf : t) {
              std::string_view tk;
              if (tf.unescaped_key().get(tk)) break;
              simdjson::ondemand::value tv;
              if (tf.value().get(tv)) break;
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
            tensors.push_back(std::move(dt));
          }
          // One allocation of the exact size per operator (no outgrown blocks left between the
          // records: freed later, an operator's records then make whole free pages).
          op.tensors.reserve(tensors.size());
          std::move(tensors.begin(), tensors.end(), std::back_inserter(op.tensors));
          tensors.clear();
        }
      }
    }
    if (bad) {
      // Only the last line may be cut by a crash; anything else is a damaged manifest.
      if (in.peek() == EOF) {
        st.warning = manifest.string() + ":" + std::to_string(st.line_no) + ": incomplete last record ignored";
        break;
      }
      return ParseError(manifest.string() + ":" + std::to_string(st.line_no) + ": not a manifest record");
    }
    ++st.count;
    return true;
  }
  st.done = true;
  const std::filesystem::path& dir = st.dir;
  // The end-of-dump marker (written last by the dumper): absent, or counting other records than
  // the manifest holds, means the dump was cut short.
  const std::filesystem::path end = dir / kDumpEndMarker;
  std::string why;
  if (DescribeFileType(end) == "missing") {
    why = "no end-of-dump marker (" + std::string(kDumpEndMarker) +
          "): the run that wrote it did not finish (killed or crashed?); it may be truncated";
  } else if (auto text = ReadFile(end); !text.ok()) {
    why = text.status().message();
  } else {
    simdjson::padded_string json(*text);
    simdjson::ondemand::document doc;
    int64_t records = -1;
    if (parser.iterate(json).get(doc) || doc["records"].get_int64().get(records) || records < 0)
      why = "a damaged end-of-dump marker (" + std::string(kDumpEndMarker) + "); it may be truncated";
    else if (static_cast<uint64_t>(records) != st.count)
      why = "truncated: its end-of-dump marker counts " + std::to_string(records) + " operators, the manifest holds " +
            std::to_string(st.count);
    else st.complete = true;
  }
  if (!why.empty()) {
    std::string note = dir.string() + ": " + why;
    st.warning = st.warning.empty() ? note : st.warning + "; " + note;
  }
  return false;
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
