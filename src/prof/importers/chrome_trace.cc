#include "prof/importers/chrome_trace.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "prof/importers/importer.h"
#include "prof/json_stream.h"

namespace portkit::prof {

bool ParseMicrosToNanos(std::string_view t, int64_t* ns, bool* out_of_range) {
  auto too_big = [&] {
    if (out_of_range) *out_of_range = true;
    return false;
  };
  // A raw token carries the white space after it (a "ts" last in its object is followed by a
  // newline in Kineto's pretty-printed traces).
  auto blank = [](char c) { return c == '"' || c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!t.empty() && blank(t.front())) t.remove_prefix(1);
  while (!t.empty() && blank(t.back())) t.remove_suffix(1);
  if (t.empty()) return false;
  bool neg = t.front() == '-';
  if (neg) t.remove_prefix(1);
  constexpr int64_t kMaxMicros = kMaxTimestampNs / 1000;
  // Exponent form: rare (relative durations); a double is exact enough there. Taken whenever the
  // text has an 'e' or 'E' anywhere (the loop below only looks for one when it meets a character
  // it does not take, so plain numbers are scanned once).
  auto exponent = [&]() -> bool {
    std::string s(t);
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end || std::isnan(v)) return false;
    // Checked before any conversion: 1e300 µs has no int64 value (converting it is undefined).
    if (!(v <= static_cast<double>(kMaxMicros))) return too_big();
    *ns = static_cast<int64_t>(std::llround(v * 1000.0)) * (neg ? -1 : 1);
    return true;
  };
  auto has_exponent = [&] {
    for (char c : t)
      if (c == 'e' || c == 'E') return true;
    return false;
  };
  // The whole part, then the fraction (its first three digits kept): one pass over the digits.
  auto digit = [](char c) { return static_cast<unsigned char>(c - '0') <= 9; };
  const size_t n = t.size();
  size_t i = 0;
  int64_t whole = 0;
  for (; i < n && digit(t[i]); ++i) {
    if (whole > kMaxMicros / 10) {  // 99999999999999999999999 µs: checked before it could wrap
      if (has_exponent()) return exponent();
      for (char rest : t)
        if (!digit(rest) && rest != '.') return false;
      return too_big();
    }
    whole = whole * 10 + (t[i] - '0');
  }
  bool any = i > 0;
  int64_t frac = 0;
  int frac_digits = 0;
  if (i < n && t[i] == '.') {
    for (++i; i < n && digit(t[i]); ++i) {
      any = true;
      if (frac_digits < 3) frac = frac * 10 + (t[i] - '0'), ++frac_digits;
    }
  }
  if (i < n) return has_exponent() && exponent();
  if (!any) return false;
  if (whole > kMaxMicros) return too_big();
  while (frac_digits < 3) frac *= 10, ++frac_digits;
  *ns = (whole * 1000 + frac) * (neg ? -1 : 1);
  return true;
}

std::string_view::size_type JsonStart(std::string_view head) { return head.find_first_not_of(" \t\r\n"); }

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
  if (cat == "cpu_op" || cat == "Operator" || (legacy && cat.empty()))
    return step ? EventKind::kStep : EventKind::kCpuOp;
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

/// Parsed events on their way from the parsing thread to the store's thread. Strings live in
/// fixed chunks, so the views in `events` and `marks` stay valid while the batch fills.
class Batch {
 public:
  static constexpr size_t kChunk = 256 << 10;
  static constexpr size_t kFullEvents = 1024;
  static constexpr size_t kFullBytes = 512 << 10;

  std::vector<Event> events;
  std::vector<Mark> marks;

  std::string_view Keep(std::string_view s) {
    if (s.empty()) return {};
    if (s.size() > kChunk) {  // a large event (a long args object) gets a chunk of its own
      big_.emplace_back(new char[s.size()]);
      std::memcpy(big_.back().get(), s.data(), s.size());
      bytes_ += s.size();
      return {big_.back().get(), s.size()};
    }
    if (chunks_.empty() || used_ + s.size() > kChunk) {
      if (++current_ >= chunks_.size()) chunks_.emplace_back(new char[kChunk]), current_ = chunks_.size() - 1;
      used_ = 0;
    }
    char* at = chunks_[current_].get() + used_;
    std::memcpy(at, s.data(), s.size());
    used_ += s.size();
    bytes_ += s.size();
    return {at, s.size()};
  }
  bool Full() const { return events.size() + marks.size() >= kFullEvents || bytes_ >= kFullBytes; }
  bool Empty() const { return events.empty() && marks.empty(); }
  void Clear() {
    events.clear();
    marks.clear();
    big_.clear();
    current_ = static_cast<size_t>(-1);
    used_ = kChunk;
    bytes_ = 0;
  }

 private:
  std::vector<std::unique_ptr<char[]>> chunks_, big_;
  size_t current_ = static_cast<size_t>(-1), used_ = kChunk, bytes_ = 0;
};

/// A bounded hand-over of batches between the parsing thread and the store's thread (at most
/// kInFlight full batches wait, so memory stays bounded whatever the trace).
class BatchQueue {
 public:
  static constexpr size_t kInFlight = 2;

  /// Parsing side: a batch to fill (a used one when there is one).
  std::unique_ptr<Batch> Empty() {
    std::unique_lock<std::mutex> lock(mu_);
    if (free_.empty()) return std::make_unique<Batch>();
    auto b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  /// Parsing side: hands a filled batch over (waits while kInFlight are waiting).
  void Push(std::unique_ptr<Batch> b) {
    std::unique_lock<std::mutex> lock(mu_);
    space_.wait(lock, [&] { return full_.size() < kInFlight || stopped_; });
    if (stopped_) return;
    full_.push_back(std::move(b));
    ready_.notify_one();
  }
  /// Parsing side: no more batches.
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    ready_.notify_one();
  }
  /// Store side: the next batch, or null once closed and drained.
  std::unique_ptr<Batch> Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait(lock, [&] { return !full_.empty() || closed_; });
    if (full_.empty()) return nullptr;
    auto b = std::move(full_.front());
    full_.pop_front();
    space_.notify_one();
    return b;
  }
  /// Store side: gives a consumed batch back for reuse.
  void Recycle(std::unique_ptr<Batch> b) {
    b->Clear();
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(b));
  }
  /// Store side: the store failed; the parsing side stops at its next event.
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    full_.clear();
    space_.notify_all();
  }
  bool stopped() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_;
  }

 private:
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<std::unique_ptr<Batch>> full_;
  std::vector<std::unique_ptr<Batch>> free_;
  bool closed_ = false, stopped_ = false;
};

class EventParser {
 public:
  EventParser(BatchQueue& queue, std::string_view format, ImportResult& result)
      : queue_(queue),
        legacy_(format == "legacy"),
        ascend_(format == "ascend_pt"),
        result_(result),
        batch_(queue.Empty()) {}

  /// Hands the last, partly filled batch over.
  void Flush() {
    if (!batch_->Empty()) queue_.Push(std::move(batch_));
    batch_ = queue_.Empty();
  }

  /// Ascend traces: events stored before their process's name was seen (metadata after the
  /// events) get their kind now. Called once, after the last event.
  Status FinishKinds(TraceWriter& writer) {
    for (int64_t pid : unnamed_pids_) {
      auto it = process_names_.find(pid);
      if (it == process_names_.end()) continue;
      EventKind kind = AscendProcessKind(it->second);
      if (kind == EventKind::kOther) continue;
      auto moved = writer.SetKindOfProcess(pid, EventKind::kOther, kind);
      if (!moved.ok()) return moved.status();
      result_.per_kind[EventKindName(kind)] += static_cast<uint64_t>(*moved);
      uint64_t& other = result_.per_kind[EventKindName(EventKind::kOther)];
      other -= std::min(other, static_cast<uint64_t>(*moved));
      if (other == 0) result_.per_kind.erase(EventKindName(EventKind::kOther));
    }
    return Status::Ok();
  }

  /// One event, parsed where the splitter holds it (it is followed by kEventPadding readable bytes).
  void Parse(std::string_view text) {
    static_assert(kEventPadding >= simdjson::SIMDJSON_PADDING);
    simdjson::ondemand::document doc;
    simdjson::ondemand::object obj;
    if (parser_.iterate(text.data(), text.size(), text.size() + kEventPadding).get(doc) || doc.get_object().get(obj)) {
      ++result_.skipped;
      return;
    }
    Event e;
    bool has_ts = false;
    const bool bad = !ReadMembers(doc, obj, e, &has_ts);
    // Numbers out of range leave the event out, counted (docs/safety.md); never wrapped.
    if (!bad && ph_ == "X" && has_ts &&
        (invalid_ || !TimesInRange(e.ts_ns, e.dur_ns) || e.dur_ns > kMaxTraceDurationSumNs - duration_sum_))
      invalid_ = true;
    if (!bad && ph_ == "M" && name_ == "process_name" && e.pid >= 0 && !meta_name_.empty())
      process_names_[e.pid] = meta_name_;
    if (!bad && !invalid_ && !ph_.empty() && ph_ != "X") {
      KeepMark(text, e, has_ts);
      return;
    }
    if (bad || invalid_ || ph_ != "X" || !has_ts) {
      ++result_.skipped;  // malformed events, events with an out-of-range number
      if (invalid_) ++result_.invalid;
      Clear();
      return;
    }
    KeepEvent(e);
  }

  /// Stored events by kind, into the result (once, at the end).
  void CountKinds() {
    for (size_t k = 0; k < per_kind_.size(); ++k)
      if (per_kind_[k]) result_.per_kind[EventKindName(static_cast<EventKind>(k))] += per_kind_[k];
  }

 private:
  void Clear() {
    invalid_ = false;
    ph_ = cat_ = name_ = meta_name_ = {};
    dims_ = types_ = args_ = {};
  }

  /// Reads the members of the event in hand into `e` and ph_, cat_, name_ (args: meta_name_,
  /// dims_, types_, args_); false when the event is malformed.
  bool ReadMembers(simdjson::ondemand::document& doc, simdjson::ondemand::object& obj, Event& e, bool* has_ts) {
    bool ok = true;
    std::string_view ph;
    for (auto item : obj) {
      simdjson::ondemand::field field;
      std::string_view key;
      if (std::move(item).get(field) || field.unescaped_key().get(key)) return false;
      simdjson::ondemand::value& v = field.value();
      if (key == "ph") {
        if (v.get_string().get(ph)) ok = false;  // malformed; read on, so its bad numbers are counted
        ph_ = ph;
      } else if (key == "cat") {
        std::string_view s;
        if (!v.get_string().get(s)) cat_ = s;
      } else if (key == "name") {
        std::string_view s;
        if (!v.get_string().get(s)) name_ = s;
      } else if (key == "pid") {
        e.pid = IntOf(v, &invalid_);
      } else if (key == "tid") {
        e.tid = IntOf(v, &invalid_);
      } else if (key == "ts" || key == "dur") {
        int64_t ns;
        if (!ParseMicrosToNanos(v.raw_json_token(), &ns, &invalid_)) return false;
        (key == "ts" ? e.ts_ns : e.dur_ns) = ns;
        *has_ts |= key == "ts";
      } else if (key == "args") {
        ReadArgs(doc, v, e);
      }
    }
    return ok;
  }

  /// Reads `args` (Args) and keeps its raw text for the timeline: from its '{' to where the parser
  /// stands once its members have been read (the ',' or '}' after it).
  void ReadArgs(simdjson::ondemand::document& doc, simdjson::ondemand::value v, Event& e) {
    const char* start = v.raw_json_token().data();
    if (!Args(v, e)) return;
    const char* end = nullptr;
    if (doc.current_location().get(end) || end <= start) return;
    std::string_view raw(start, static_cast<size_t>(end - start));
    while (!raw.empty() && raw.back() != '}') raw.remove_suffix(1);
    if (raw.size() >= 2 && raw.front() == '{') args_ = raw;
  }

  /// Metadata (process and thread names), counters, instants, flows: kept as written, for the
  /// timeline (docs/prof.md, "Timeline").
  void KeepMark(std::string_view text, const Event& e, bool has_ts) {
    Mark m;
    m.ph = batch_->Keep(ph_);
    m.has_ts = has_ts;
    m.ts_ns = e.ts_ns;
    m.pid = e.pid;
    m.tid = e.tid;
    m.json = batch_->Keep(text);
    batch_->marks.push_back(m);
    ++result_.marks;
    Clear();
    if (batch_->Full()) Flush();
  }

  /// A complete event ("X") with its times in range: its kind, then into the batch.
  void KeepEvent(Event& e) {
    duration_sum_ += e.dur_ns;
    e.kind = KindOf(cat_, name_, legacy_);
    if (ascend_ && e.kind == EventKind::kOther && cat_.empty()) {
      auto it = process_names_.find(e.pid);
      if (it != process_names_.end()) e.kind = AscendProcessKind(it->second);
      else unnamed_pids_.insert(e.pid);
    }
    e.name_key = Key(name_, &e.name);
    e.category_key = Key(cat_, &e.category);
    e.input_dims = batch_->Keep(dims_);
    e.input_types = batch_->Keep(types_);
    e.args = batch_->Keep(args_);
    batch_->events.push_back(e);
    ++result_.events;
    ++per_kind_[static_cast<size_t>(e.kind)];
    Clear();
    if (batch_->Full()) Flush();
  }

  /// The key of `text` among this trace's names and categories (Event::name_key), with `*kept`
  /// viewing the parser's copy of it (valid for the whole import, unlike the batch's): the
  /// store's thread then looks each distinct string up once. Past 2^31 distinct strings the
  /// text goes with the batch and the store looks it up itself (-1).
  int32_t Key(std::string_view text, std::string_view* kept) {
    if (auto it = keys_.find(text); it != keys_.end()) {
      *kept = it->first;
      return it->second;
    }
    if (texts_.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      *kept = batch_->Keep(text);
      return -1;
    }
    texts_.emplace_back(text);
    const auto key = static_cast<int32_t>(texts_.size() - 1);
    keys_.emplace(std::string_view(texts_.back()), key);
    *kept = texts_.back();
    return key;
  }

  /// Reads the members portkit uses; true when the whole object was read.
  bool Args(simdjson::ondemand::value v, Event& e) {
    simdjson::ondemand::object args;
    if (v.get_object().get(args)) return false;
    for (auto item : args) {
      simdjson::ondemand::field f;
      std::string_view k;
      if (std::move(item).get(f) || f.unescaped_key().get(k)) return false;
      simdjson::ondemand::value& a = f.value();
      if (k == "name") {  // metadata: the process or thread name
        std::string_view n;
        if (!a.get_string().get(n)) meta_name_ = n;
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
        if (!a.get_array().get(arr) && !arr.raw_json().get(raw)) (k == "Input Dims" ? dims_ : types_) = raw;
      }
    }
    return true;
  }

  BatchQueue& queue_;
  bool legacy_;
  bool ascend_;
  ImportResult& result_;
  std::unique_ptr<Batch> batch_;
  std::array<uint64_t, static_cast<size_t>(EventKind::kOther) + 1> per_kind_{};
  std::map<int64_t, std::string> process_names_;        // pid → process_name metadata
  std::set<int64_t> unnamed_pids_;                      // pids of cat-less events stored before their name
  std::deque<std::string> texts_;                       // names and categories by key (a deque: views stay valid)
  std::unordered_map<std::string_view, int32_t> keys_;  // text (viewing texts_) → key
  simdjson::ondemand::parser parser_;
  // Views into the event in hand or the parser's buffer (valid while Parse runs).
  std::string_view ph_, cat_, name_, meta_name_;
  // Views into the event in hand (valid while Parse runs): copied once, into the batch.
  std::string_view dims_, types_, args_;
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
  // Two threads: this one writes to the store (SQLite is used from this thread only) while a
  // second reads, splits and parses the file into batches of events.
  BatchQueue queue;
  EventParser parser(queue, result.format, result);
  StreamStats stats;
  StreamCallbacks cb;
  struct Device {
    int64_t id;
    std::string name, properties;
  };
  std::vector<Device> devices;
  cb.on_event = [&](std::string_view text) { parser.Parse(text); };
  cb.stop = [&] { return queue.stopped(); };
  std::optional<int64_t> base_ns;
  cb.on_member = [&](std::string_view key, std::string_view value) {
    if (key == "baseTimeNanoseconds") {
      // An integer of nanoseconds, parsed from its digits (never through a double).
      int64_t v = 0;
      bool any = false;
      for (char c : value) {
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c < '0' || c > '9' || v > kMaxTimestampNs / 10) return;
        v = v * 10 + (c - '0');
        any = true;
      }
      if (any && v <= kMaxTimestampNs) base_ns = v;
      return;
    }
    if (key != "deviceProperties") return;
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
      devices.push_back({id, std::string(name), props});
    }
  };
  Status split = Status::Ok();
  std::thread reader([&] {
    split = SplitTraceEvents(path, cb, &stats, limits);
    parser.Flush();
    queue.Close();
  });
  Status stored = Status::Ok();
  while (auto batch = queue.Pop()) {
    if (stored.ok()) stored = writer->AddEvents(batch->events);
    if (stored.ok()) stored = writer->AddMarks(batch->marks);
    if (!stored.ok()) queue.Stop();
    queue.Recycle(std::move(batch));
  }
  reader.join();
  PORTKIT_RETURN_IF_ERROR(stored);
  PORTKIT_RETURN_IF_ERROR(split);
  for (const auto& d : devices) PORTKIT_RETURN_IF_ERROR(writer->AddDevice(d.id, d.name, d.properties));
  if (base_ns) writer->SetBaseTime(*base_ns);
  parser.CountKinds();
  PORTKIT_RETURN_IF_ERROR(parser.FinishKinds(*writer));
  result.bytes = stats.bytes_read;
  result.truncated = stats.truncated;
  if (stats.truncated && result.events == 0)
    return ParseError(path + ": corrupt trace, no complete event before the damage (" + stats.stop_reason + ")");
  if (stats.truncated)
    result.warning = "truncated or corrupt: " + stats.stop_reason + "; kept the " + std::to_string(result.events) +
                     " events before it (" + std::to_string(stats.bytes_read) + " bytes read)";
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
