#include "prof/importers/chrome_trace.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "prof/json_stream.h"
#include "prof/importers/importer.h"

namespace portkit::prof {

bool ParseMicrosToNanos(std::string_view t, int64_t* ns, bool* out_of_range) {
  auto too_big = [&] {
    if (out_of_range) *out_of_range = true;
    return false;
  };
  while (!t.empty() && (t.front() == '"' || t.front() == ' ')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == '"' || t.back() == ' ')) t.remove_suffix(1);
  if (t.empty()) return false;
  bool neg = t.front() == '-';
  if (neg) t.remove_prefix(1);
  constexpr int64_t kMaxMicros = kMaxTimestampNs / 1000;
  if (t.find_first_of("eE") != std::string_view::npos) {
    // Exponent form: rare (relative durations); a double is exact enough there.
    std::string s(t);
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end || std::isnan(v)) return false;
    // Checked before any conversion: 1e300 µs has no int64 value (converting it is undefined).
    if (!(v <= static_cast<double>(kMaxMicros))) return too_big();
    *ns = static_cast<int64_t>(std::llround(v * 1000.0)) * (neg ? -1 : 1);
    return true;
  }
  int64_t whole = 0, frac = 0;
  int frac_digits = 0;
  bool any = false, dot = false;
  for (char c : t) {
    if (c == '.' && !dot) {
      dot = true;
      continue;
    }
    if (c < '0' || c > '9') return false;
    any = true;
    if (!dot) {
      if (whole > kMaxMicros / 10) {  // 99999999999999999999999 µs: checked before it could wrap
        for (char rest : t)
          if ((rest < '0' || rest > '9') && rest != '.') return false;
        return too_big();
      }
      whole = whole * 10 + (c - '0');
    } else if (frac_digits < 3) {
      frac = frac * 10 + (c - '0');
      ++frac_digits;
    }
  }
  if (!any) return false;
  if (whole > kMaxMicros) return too_big();
  while (frac_digits < 3) frac *= 10, ++frac_digits;
  *ns = (whole * 1000 + frac) * (neg ? -1 : 1);
  return true;
}

std::string_view::size_type JsonStart(std::string_view head) {
  return head.find_first_not_of(" \t\r\n");
}

bool LooksLikeTraceObject(std::string_view head) {
  auto first = JsonStart(head);
  if (first == std::string_view::npos || head[first] != '{') return false;
  return head.find("\"traceEvents\"") != std::string_view::npos ||
         head.find("\"schemaVersion\"") != std::string_view::npos ||
         head.find("\"deviceProperties\"") != std::string_view::npos;
}

bool LooksLikeEventArray(std::string_view head) {
  auto first = JsonStart(head);
  if (first == std::string_view::npos || head[first] != '[') return false;
  auto second = head.find_first_not_of(" \t\r\n", first + 1);
  return second != std::string_view::npos && head[second] == '{' &&
         head.find("\"ph\"", second) != std::string_view::npos;
}

bool HasStringTimestamp(std::string_view head) {
  for (size_t at = head.find("\"ts\""); at != std::string_view::npos; at = head.find("\"ts\"", at + 4)) {
    size_t i = at + 4;
    while (i < head.size() && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) ++i;
    if (i >= head.size() || head[i] != ':') continue;
    ++i;
    while (i < head.size() && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) ++i;
    if (i < head.size()) return head[i] == '"';
  }
  return false;
}

namespace {

EventKind KindOf(std::string_view cat, std::string_view name, bool legacy) {
  bool step = name.rfind("ProfilerStep#", 0) == 0;
  if (cat == "cpu_op" || cat == "Operator" || (legacy && cat.empty())) return step ? EventKind::kStep : EventKind::kCpuOp;
  if (cat == "user_annotation") return step ? EventKind::kStep : EventKind::kUserAnnotation;
  if (cat == "gpu_user_annotation") return EventKind::kGpuAnnotation;
  if (cat == "kernel" || cat == "Kernel") return EventKind::kKernel;
  if (cat == "gpu_memcpy" || cat == "Memcpy") return EventKind::kMemcpy;
  if (cat == "gpu_memset" || cat == "Memset") return EventKind::kMemset;
  if (cat == "cuda_runtime" || cat == "Runtime" || cat == "hip_runtime") return EventKind::kRuntime;
  if (cat == "cuda_driver" || cat == "hip_driver") return EventKind::kDriver;
  if (cat == "cuda_sync") return EventKind::kSync;
  if (cat == "python_function") return EventKind::kPythonFunction;
  return EventKind::kOther;
}

/// The kind of a `cat`-less event in a torch_npu trace_view.json, from the name its process
/// carries in the trace's `process_name` metadata: "CANN" holds the AscendCL API calls (host API),
/// "Ascend Hardware" the device tasks, "HCCL" the communication tasks (device tasks whose names the
/// target's communication markers recognise), "Overlap Analysis" the profiler's own derived
/// Computing/Communication/Free spans (kept for the timeline, never operators). kOther: not one of
/// them.
EventKind AscendProcessKind(std::string_view process) {
  if (process == "CANN" || process == "AscendCL") return EventKind::kRuntime;
  if (process == "Ascend Hardware" || process == "HCCL") return EventKind::kKernel;
  return EventKind::kOther;
}

/// An integer field (pid, tid, ids, sizes); -1 when absent or not a number. A number with no
/// int64 value (1e300, 99999999999999999999999) sets `*invalid` instead of being converted.
int64_t IntOf(simdjson::ondemand::value v, bool* invalid = nullptr) {
  simdjson::ondemand::json_type t;
  if (v.type().get(t)) return -1;
  if (t == simdjson::ondemand::json_type::number) {
    int64_t i;
    if (!v.get_int64().get(i)) return i;
    double d;
    if (!v.get_double().get(d)) {
      // 2^63 is exact as a double; anything at or past it (or NaN) has no int64 value.
      if (d > -9223372036854775808.0 && d < 9223372036854775808.0) return static_cast<int64_t>(d);
      if (invalid) *invalid = true;
      return -1;
    }
    if (invalid) *invalid = true;  // a big integer simdjson could not read as int64 or double
    return -1;
  }
  if (t == simdjson::ondemand::json_type::string) {
    std::string_view s;
    if (v.get_string().get(s)) return -1;
    int64_t ns;
    bool too_big = false;
    if (ParseMicrosToNanos(s, &ns, &too_big)) return ns / 1000;
    if (too_big && invalid) *invalid = true;
  }
  return -1;
}

void Triple(simdjson::ondemand::value v, int64_t out[3]) {
  simdjson::ondemand::array arr;
  if (v.get_array().get(arr)) return;
  int i = 0;
  for (auto item : arr) {
    int64_t x;
    if (i < 3 && !item.get_int64().get(x)) out[i] = x;
    ++i;
  }
}

class EventParser {
 public:
  EventParser(TraceWriter& writer, std::string_view format, ImportResult& result)
      : writer_(writer), legacy_(format == "legacy"), ascend_(format == "ascend_pt"), result_(result) {}

  Status status;

  /// Ascend traces: events stored before their process's name was seen (metadata after the
  /// events) get their kind now. Called once, after the last event.
  Status FinishKinds() {
    if (!status.ok()) return status;
    for (int64_t pid : unnamed_pids_) {
      auto it = process_names_.find(pid);
      if (it == process_names_.end()) continue;
      EventKind kind = AscendProcessKind(it->second);
      if (kind == EventKind::kOther) continue;
      auto moved = writer_.SetKindOfProcess(pid, EventKind::kOther, kind);
      if (!moved.ok()) return moved.status();
      result_.per_kind[EventKindName(kind)] += static_cast<uint64_t>(*moved);
      uint64_t& other = result_.per_kind[EventKindName(EventKind::kOther)];
      other -= std::min(other, static_cast<uint64_t>(*moved));
      if (other == 0) result_.per_kind.erase(EventKindName(EventKind::kOther));
    }
    return Status::Ok();
  }

  void Parse(std::string_view text) {
    if (!status.ok()) return;
    buffer_.assign(text);
    buffer_.append(simdjson::SIMDJSON_PADDING, ' ');
    simdjson::ondemand::document doc;
    simdjson::ondemand::object obj;
    if (parser_.iterate(buffer_.data(), text.size(), buffer_.size()).get(doc) || doc.get_object().get(obj)) {
      ++result_.skipped;
      return;
    }
    Event e;
    std::string_view ph;
    bool has_ts = false;
    bool bad = false;
    for (auto field : obj) {
      std::string_view key;
      if (field.unescaped_key().get(key)) {
        bad = true;
        break;
      }
      simdjson::ondemand::value v;
      if (field.value().get(v)) {
        bad = true;
        break;
      }
      if (key == "ph") {
        if (v.get_string().get(ph)) bad = true;
        ph_.assign(ph);
      } else if (key == "cat") {
        std::string_view s;
        if (!v.get_string().get(s)) cat_.assign(s);
      } else if (key == "name") {
        std::string_view s;
        if (!v.get_string().get(s)) name_.assign(s);
      } else if (key == "pid") {
        e.pid = IntOf(v, &invalid_);
      } else if (key == "tid") {
        e.tid = IntOf(v, &invalid_);
      } else if (key == "ts" || key == "dur") {
        std::string_view raw;
        raw = v.raw_json_token();
        int64_t ns;
        if (!ParseMicrosToNanos(raw, &ns, &invalid_)) {
          bad = true;
          break;
        }
        (key == "ts" ? e.ts_ns : e.dur_ns) = ns;
        has_ts |= key == "ts";
      } else if (key == "args") {
        Args(v, e);
      }
    }
    // Numbers out of range leave the event out, counted (docs/safety.md); never wrapped.
    if (!bad && ph_ == "X" && has_ts &&
        (invalid_ || !TimesInRange(e.ts_ns, e.dur_ns) || e.dur_ns > kMaxTraceDurationSumNs - duration_sum_))
      invalid_ = true;
    if (!bad && ph_ == "M" && name_ == "process_name" && e.pid >= 0 && !meta_name_.empty())
      process_names_[e.pid] = meta_name_;
    if (bad || invalid_ || ph_ != "X" || !has_ts) {
      ++result_.skipped;  // metadata (M), flows (s/f), instants, counters, malformed events
      if (invalid_) ++result_.invalid;
      invalid_ = false;
      ph_.clear(), cat_.clear(), name_.clear(), dims_.clear(), types_.clear(), meta_name_.clear();
      return;
    }
    duration_sum_ += e.dur_ns;
    e.name = name_;
    e.category = cat_;
    e.kind = KindOf(cat_, name_, legacy_);
    if (ascend_ && e.kind == EventKind::kOther && cat_.empty()) {
      auto it = process_names_.find(e.pid);
      if (it != process_names_.end()) e.kind = AscendProcessKind(it->second);
      else unnamed_pids_.insert(e.pid);
    }
    e.input_dims = dims_;
    e.input_types = types_;
    status = writer_.AddEvent(e);
    ++result_.events;
    ++result_.per_kind[EventKindName(e.kind)];
    ph_.clear(), cat_.clear(), name_.clear(), dims_.clear(), types_.clear(), meta_name_.clear();
  }

 private:
  void Args(simdjson::ondemand::value v, Event& e) {
    simdjson::ondemand::object args;
    if (v.get_object().get(args)) return;
    for (auto f : args) {
      std::string_view k;
      if (f.unescaped_key().get(k)) return;
      simdjson::ondemand::value a;
      if (f.value().get(a)) return;
      if (k == "name") {  // metadata: the process or thread name
        std::string_view n;
        if (!a.get_string().get(n)) meta_name_.assign(n);
      } else if (k == "External id") e.external_id = IntOf(a, &invalid_);
      else if (k == "correlation") e.correlation = IntOf(a, &invalid_);
      else if (k == "grid") Triple(a, e.grid);
      else if (k == "block") Triple(a, e.block);
      else if (k == "stream") e.tid = IntOf(a, &invalid_);
      else if (k == "device") e.pid = IntOf(a, &invalid_);
      else if (k == "registers per thread") e.registers = IntOf(a, &invalid_);
      else if (k == "shared memory") e.shared_memory = IntOf(a, &invalid_);
      else if (k == "bytes") e.bytes = IntOf(a, &invalid_);
      else if (k == "est. achieved occupancy %") {
        double d;
        if (!a.get_double().get(d)) e.occupancy = d;
      } else if (k == "Input Dims" || k == "Input type") {
        simdjson::ondemand::array arr;
        std::string_view raw;
        if (!a.get_array().get(arr) && !arr.raw_json().get(raw)) (k == "Input Dims" ? dims_ : types_).assign(raw);
      }
    }
  }

  TraceWriter& writer_;
  bool legacy_;
  bool ascend_;
  ImportResult& result_;
  std::map<int64_t, std::string> process_names_;  // pid → process_name metadata
  std::set<int64_t> unnamed_pids_;                // pids of cat-less events stored before their name
  std::string meta_name_;                         // args.name of the event in hand
  simdjson::ondemand::parser parser_;
  std::string buffer_, ph_, cat_, name_, dims_, types_;
  bool invalid_ = false;      // the event in hand has an out-of-range number
  int64_t duration_sum_ = 0;  // of the events stored so far, ≤ kMaxTraceDurationSumNs
};

}  // namespace

Expected<ImportResult> ImportChromeTrace(const std::filesystem::path& file, const std::string& display,
                                         std::string_view format, Store& store, const ImportLimits& limits) {
  const std::string path = file.string();
  ImportResult result;
  result.format = std::string(format);
  auto writer = store.BeginTrace(display, result.format);
  if (!writer.ok()) return writer.status();
  EventParser parser(*writer, result.format, result);
  StreamStats stats;
  StreamCallbacks cb;
  Status device_status;
  cb.on_event = [&](std::string_view text) { parser.Parse(text); };
  cb.on_member = [&](std::string_view key, std::string_view value) {
    if (key != "deviceProperties" || !device_status.ok()) return;
    simdjson::padded_string json(value);
    simdjson::ondemand::parser p;
    simdjson::ondemand::document doc;
    simdjson::ondemand::array arr;
    if (p.iterate(json).get(doc) || doc.get_array().get(arr)) return;
    for (auto item : arr) {
      simdjson::ondemand::object o;
      if (item.get_object().get(o)) continue;
      std::string_view raw = o.raw_json().value_unsafe();
      std::string props(raw);
      simdjson::padded_string again(props);
      simdjson::ondemand::parser p2;
      simdjson::ondemand::document d2;
      if (p2.iterate(again).get(d2)) continue;
      int64_t id = 0;
      std::string_view name;
      for (auto fld : d2.get_object()) {
        std::string_view k;
        if (fld.unescaped_key().get(k)) break;
        if (k == "id") id = IntOf(fld.value());
        else if (k == "name" && fld.value().get_string().get(name)) name = {};
      }
      device_status = writer->AddDevice(id, name, props);
      if (!device_status.ok()) return;
    }
  };
  PORTKIT_RETURN_IF_ERROR(SplitTraceEvents(path, cb, &stats, limits));
  PORTKIT_RETURN_IF_ERROR(parser.FinishKinds());
  PORTKIT_RETURN_IF_ERROR(device_status);
  result.bytes = stats.bytes_read;
  result.truncated = stats.truncated;
  if (stats.truncated && result.events == 0)
    return ParseError(path + ": corrupt trace, no complete event before the damage (" + stats.stop_reason + ")");
  if (stats.truncated)
    result.warning = "truncated or corrupt: " + stats.stop_reason + "; kept the " +
                     std::to_string(result.events) + " events before it (" +
                     std::to_string(stats.bytes_read) + " bytes read)";
  if (result.invalid) {
    std::string note = std::to_string(result.invalid) +
                       " events left out: a timestamp, duration or id out of range (durations 0 to 1e14 ns, "
                       "timestamps up to 4e18 ns)";
    result.warning = result.warning.empty() ? note : result.warning + "; " + note;
  }
  PORTKIT_RETURN_IF_ERROR(writer->Finish(result.events, result.skipped, result.warning));
  return result;
}

}  // namespace portkit::prof
