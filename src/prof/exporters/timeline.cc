#include "prof/exporters/timeline.h"

#include <simdjson.h>
#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/json_writer.h"
#include "prof/exporters/summary.h"
#include "prof/importers/chrome_trace.h"

namespace portkit::prof {
namespace {

/// A complete event as the placing passes need it: its text (name, category, args) is read again
/// when it is written, so the timeline's memory grows with the number of events, not their text.
struct Row {
  int64_t trace, pid, tid, ts, dur, rowid;
  int64_t name, cat;  // ids in `strings`; cat -1: none
  bool launch_end;    // runtime/driver call or device task: an end of a launch flow
};

/// Another event (metadata, counter, instant, flow): its text is read again when it is written.
struct MarkRow {
  int64_t trace;
  bool has_ts, metadata, flow;  // ph "M"; ph "s"/"t"/"f"
  int64_t ts, pid, tid, rowid;
};

/// A track: (trace, pid, tid).
struct TrackKey {
  int64_t trace, pid, tid;
  bool operator<(const TrackKey& o) const { return std::tie(trace, pid, tid) < std::tie(o.trace, o.pid, o.tid); }
};

/// Where a flow at (trace, pid, tid, ts) binds: the lane of the shortest event starting there.
struct PointKey {
  int64_t trace, pid, tid, ts;
  bool operator==(const PointKey& o) const { return trace == o.trace && pid == o.pid && tid == o.tid && ts == o.ts; }
};
struct PointHash {
  size_t operator()(const PointKey& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : {k.trace, k.pid, k.tid, k.ts}) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

std::string Escaped(std::string_view s) {
  std::string out;
  JsonWriter::AppendEscaped(out, s);
  return out;
}

/// The raw JSON text of a value (without the spaces that follow it).
bool RawValue(simdjson::ondemand::value v, std::string_view* raw) {
  simdjson::ondemand::json_type t;
  if (v.type().get(t)) return false;
  if (t == simdjson::ondemand::json_type::object) {
    simdjson::ondemand::object o;
    return !v.get_object().get(o) && !o.raw_json().get(*raw);
  }
  if (t == simdjson::ondemand::json_type::array) {
    simdjson::ondemand::array a;
    return !v.get_array().get(a) && !a.raw_json().get(*raw);
  }
  *raw = v.raw_json_token();
  while (!raw->empty() && (raw->back() == ' ' || raw->back() == '\n' || raw->back() == '\r' || raw->back() == '\t'))
    raw->remove_suffix(1);
  return !raw->empty();
}

/// `args.name` of a metadata event's raw JSON; empty when it has none.
std::string MetadataName(simdjson::ondemand::parser& parser, std::string_view json, std::string* which) {
  simdjson::padded_string text(json);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  if (parser.iterate(text).get(doc) || doc.get_object().get(obj)) return {};
  std::string name;
  for (auto f : obj) {
    std::string_view key;
    if (f.unescaped_key().get(key)) return {};
    simdjson::ondemand::value v;
    if (f.value().get(v)) return {};
    if (key == "name") {
      std::string_view s;
      if (!v.get_string().get(s)) *which = std::string(s);
    } else if (key == "args") {
      simdjson::ondemand::object args;
      if (v.get_object().get(args)) continue;
      for (auto a : args) {
        std::string_view k;
        if (a.unescaped_key().get(k)) break;
        std::string_view s;
        if (k == "name" && !a.value().get_string().get(s)) name = std::string(s);
      }
    }
  }
  return name;
}

bool IsFlow(std::string_view ph) { return ph == "s" || ph == "t" || ph == "f"; }

/// BuildTimeline's passes (read the store, place events on tracks and lanes, write the JSON) and
/// the state they share.
class TimelineBuilder {
 public:
  TimelineBuilder(Store& store, const TimelineSink& sink, TimelineStats* stats)
      : db_(store.db()), sink_(sink), stats_(stats) {}

  Status Write() {
    // One read transaction for every pass: they all see the same store (an import beside the
    // export changes none of them), and its lock is taken once, not once per event read back.
    std::optional<sql::Transaction> snapshot;
    if (sqlite3_get_autocommit(db_.raw())) {
      snapshot.emplace(db_, sql::Transaction::Mode::kDeferred);
      PORTKIT_RETURN_IF_ERROR(snapshot->status());
    }
    PORTKIT_RETURN_IF_ERROR(LoadStrings());
    PORTKIT_RETURN_IF_ERROR(LoadEvents());
    PORTKIT_RETURN_IF_ERROR(LoadMarks());
    PORTKIT_RETURN_IF_ERROR(LoadTraces());
    several_traces_ = trace_names_.size() > 1;
    FindBases();
    NumberProcesses();
    AssignLanes();
    NumberSiblingTracks();
    out_ = std::string(kTimelineHead);
    PORTKIT_RETURN_IF_ERROR(WriteTrackNames());
    PORTKIT_RETURN_IF_ERROR(WriteMarks());
    PORTKIT_RETURN_IF_ERROR(WriteEvents());
    PORTKIT_RETURN_IF_ERROR(WriteLaunchFlows());
    out_ += "\n]}\n";
    return Drain();
  }

 private:
  /// The output is handed to the sink in pieces of about kPiece bytes.
  static constexpr size_t kPiece = 1 << 20;

  Status Drain() {
    if (out_.empty()) return Status::Ok();
    Status st = sink_(out_);
    out_.clear();
    return st;
  }
  Status MaybeDrain() { return out_.size() >= kPiece ? Drain() : Status::Ok(); }

  /// Before each event: a new line, after a comma but for the first.
  void Separator() {
    out_ += first_event_ ? "\n" : ",\n";
    first_event_ = false;
  }

  /// Names and categories by id (each distinct text once).
  Status LoadStrings() {
    auto q = db_.Prepare("SELECT id, value FROM strings");
    if (!q.ok()) return q.status();
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      strings_.emplace(q->Int(0), std::string(q->Text(1)));
    }
    return Status::Ok();
  }

  std::string_view StringOf(int64_t id) const {
    auto it = strings_.find(id);
    return it == strings_.end() ? std::string_view() : std::string_view(it->second);
  }

  /// The complete events in timeline order, without their texts.
  Status LoadEvents() {
    auto q = db_.Prepare(
        "SELECT e.trace, e.pid, e.tid, e.ts, e.dur, e.rowid, e.name, c.id, "
        "e.kind IN ('runtime', 'driver', 'kernel', 'gpu_memcpy', 'gpu_memset') "
        "FROM events e JOIN strings s ON s.id = e.name LEFT JOIN strings c ON c.id = e.category "
        "ORDER BY e.trace, e.pid, e.tid, e.ts, e.dur DESC, e.rowid");
    if (!q.ok()) return q.status();
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      rows_.push_back({q->Int(0), q->Int(1), q->Int(2), q->Int(3), q->Int(4), q->Int(5), q->Int(6),
                       q->IsNull(7) ? -1 : q->Int(7), q->Int(8) != 0});
    }
    return Status::Ok();
  }

  /// The other events in the trace's order, without their texts; the names the trace gave its
  /// processes and threads (metadata) and which traces have flows of their own.
  Status LoadMarks() {
    auto q = db_.Prepare(
        "SELECT trace, ph, ts, pid, tid, rowid, CASE WHEN ph = 'M' THEN event END FROM marks ORDER BY trace, rowid");
    if (!q.ok()) return q.status();
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      const std::string_view ph = q->Text(1);
      MarkRow m{q->Int(0), !q->IsNull(2), ph == "M", IsFlow(ph), q->Int(2), q->Int(3), q->Int(4), q->Int(5)};
      if (m.flow) has_flows_.insert(m.trace);
      if (m.metadata) {
        std::string which;
        std::string name = MetadataName(parser_, q->Text(6), &which);
        if (which == "process_name") named_process_.insert({m.trace, m.pid});
        if (which == "thread_name" && !name.empty()) thread_names_[{m.trace, m.pid, m.tid}] = name;
      }
      marks_.push_back(m);
    }
    return Status::Ok();
  }

  Status LoadTraces() {
    auto q = db_.Prepare("SELECT id, path, marks, base_ns FROM traces");
    if (!q.ok()) return q.status();
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      trace_names_[q->Int(0)] = std::string(q->Text(1));
      if (!q->IsNull(3) && q->Int(3) >= 0 && q->Int(3) <= kMaxTimestampNs) clock_[q->Int(0)] = q->Int(3);
      if (!q->IsNull(2)) with_detail_.insert(q->Int(0));
      else ++stats_->without_detail;
    }
    return Status::Ok();
  }

  /// What each trace's timestamps lose on the timeline (`base_`): the traces on absolute time
  /// (baseTimeNanoseconds + ts, or ts itself when it counts from the epoch as in older Kineto)
  /// share one zero, the earliest of their first events, so the ranks of a job line up as in
  /// prof cluster's merged timeline; a trace on its own clock (the legacy profiler counts from its
  /// start) starts at its first event.
  void FindBases() {
    // Per trace: the earliest timestamp of a timed event.
    std::map<int64_t, int64_t> first;
    auto see = [&](int64_t trace, int64_t ts) {
      auto it = first.find(trace);
      if (it == first.end() || ts < it->second) first[trace] = ts;
    };
    for (const auto& r : rows_) see(r.trace, r.ts);
    for (const auto& m : marks_)
      if (m.has_ts && !m.metadata) see(m.trace, m.ts);
    std::optional<int64_t> origin;
    for (const auto& [trace, ts] : first)
      if (auto a = AbsoluteFirst(trace, ts)) origin = origin ? std::min(*origin, *a) : *a;
    for (const auto& [trace, ts] : first) {
      auto a = AbsoluteFirst(trace, ts);
      if (!a) base_[trace] = ts;
      else base_[trace] = *origin - (*a - ts);  // ts - base = absolute - origin
    }
  }

  /// The absolute time of a trace's first event `ts`; none for a trace on a clock of its own.
  std::optional<int64_t> AbsoluteFirst(int64_t trace, int64_t ts) const {
    constexpr int64_t kEpochLike = 100'000'000'000'000'000;  // 1973 in ns: below it, a clock of its own
    if (auto c = clock_.find(trace); c != clock_.end()) return c->second + ts;
    if (ts >= kEpochLike) return ts;
    return std::nullopt;
  }

  /// One process per (trace, pid), numbered in order of first appearance; the tids each uses.
  void NumberProcesses() {
    auto see = [&](int64_t trace, int64_t pid, int64_t tid) {
      auto key = std::make_pair(trace, pid);
      process_.emplace(key, static_cast<int64_t>(process_.size()) + 1);
      auto [mt, first] = max_tid_.emplace(key, tid);
      if (!first) mt->second = std::max(mt->second, tid);
    };
    for (const auto& r : rows_) see(r.trace, r.pid, r.tid);
    for (const auto& m : marks_) see(m.trace, m.pid, m.tid);
  }

  /// Lanes: per track, the events that do not nest go to the first sibling lane where they do.
  void AssignLanes() {
    lane_of_.assign(rows_.size(), 0);
    std::vector<std::vector<int64_t>> lanes;  // open ends per lane
    TrackKey cur{-1, 0, 0};
    bool first = true;
    for (size_t i = 0; i < rows_.size(); ++i) {
      const Row& r = rows_[i];
      TrackKey key{r.trace, r.pid, r.tid};
      if (first || key.trace != cur.trace || key.pid != cur.pid || key.tid != cur.tid) {
        if (!first && lanes.size() > 1) lanes_of_track_[cur] = static_cast<int32_t>(lanes.size());
        lanes.assign(1, {});
        cur = key;
        first = false;
      }
      const size_t lane = PlaceOnLane(lanes, r);
      lane_of_[i] = static_cast<int32_t>(lane);
      PointKey point{r.trace, r.pid, r.tid, r.ts};
      if (lane > 0) {
        ++stats_->moved;
        lane_at_[point] = static_cast<int32_t>(lane);
      } else if (auto it = lane_at_.find(point); it != lane_at_.end()) {
        it->second = 0;  // a shorter event starting at the same time stayed on the track
      }
    }
    if (!first && lanes.size() > 1) lanes_of_track_[cur] = static_cast<int32_t>(lanes.size());
  }

  /// The first lane of the track (`lanes`: the open ends of each) where `r` nests; a new one when
  /// none.
  static size_t PlaceOnLane(std::vector<std::vector<int64_t>>& lanes, const Row& r) {
    const int64_t end = r.ts + std::max<int64_t>(r.dur, 0);
    for (size_t lane = 0;; ++lane) {
      if (lane == lanes.size()) lanes.emplace_back();
      auto& open = lanes[lane];
      while (!open.empty() && open.back() <= r.ts) open.pop_back();
      if (open.empty() || end <= open.back()) {
        open.push_back(end);
        return lane;
      }
    }
  }

  /// Sibling tids: after the largest tid of the process, so they never meet one of the trace's.
  void NumberSiblingTracks() {
    for (const auto& [track, count] : lanes_of_track_) {
      int64_t& next = max_tid_[{track.trace, track.pid}];
      for (int32_t lane = 1; lane < count; ++lane) lane_tid_[{track, lane}] = ++next;
      stats_->sibling_tracks += static_cast<uint64_t>(count - 1);
    }
  }

  int64_t TidOf(const TrackKey& track, int32_t lane) const {
    return lane == 0 ? track.tid : lane_tid_.at({track, lane});
  }

  /// Names of the processes the trace did not name ("TRACE pid N") and of the sibling tracks
  /// (after their thread).
  Status WriteTrackNames() {
    for (const auto& [key, id] : process_) {
      if (named_process_.count(key)) continue;
      Separator();
      out_ +=
          "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(id) +
          ",\"tid\":0,\"args\":{\"name\":" + Escaped(trace_names_[key.first] + " pid " + std::to_string(key.second)) +
          "}}";
      PORTKIT_RETURN_IF_ERROR(MaybeDrain());
    }
    for (const auto& [where, tid] : lane_tid_) {
      const TrackKey& track = where.first;
      auto named = thread_names_.find(track);
      std::string thread = named != thread_names_.end() ? named->second : "tid " + std::to_string(track.tid);
      Separator();
      out_ += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(process_[{track.trace, track.pid}]) +
              ",\"tid\":" + std::to_string(tid) +
              ",\"args\":{\"name\":" + Escaped(thread + " (overlap " + std::to_string(where.second) + ")") + "}}";
      PORTKIT_RETURN_IF_ERROR(MaybeDrain());
    }
    return Status::Ok();
  }

  /// The trace's own metadata, counters, instants and flows, with pid and ts changed.
  Status WriteMarks() {
    auto q = db_.Prepare("SELECT event FROM marks WHERE rowid = ?");
    if (!q.ok()) return q.status();
    std::string event;
    for (const auto& m : marks_) {
      q->Reset();
      q->Bind(1, m.rowid);
      auto row = q->Step();
      if (!row.ok()) return row.status();
      if (!*row || !RewriteMark(m, q->Text(0), &event)) continue;
      Separator();
      out_ += event;
      ++stats_->marks;
      PORTKIT_RETURN_IF_ERROR(MaybeDrain());
    }
    return Status::Ok();
  }

  /// `m` (its JSON text `json`) as the timeline writes it into `*event`; false when its JSON
  /// cannot be read.
  bool RewriteMark(const MarkRow& m, std::string_view json, std::string* event) {
    // Several traces in one timeline: a process's name says which trace it comes from.
    std::string renamed;
    if (several_traces_ && m.metadata) {
      std::string which;
      std::string name = MetadataName(parser_, json, &which);
      if (which == "process_name") renamed = "{\"name\":" + Escaped(name + " (" + trace_names_[m.trace] + ")") + "}";
    }
    simdjson::padded_string text(json);
    simdjson::ondemand::document doc;
    simdjson::ondemand::object obj;
    if (parser_.iterate(text).get(doc) || doc.get_object().get(obj)) return false;
    int64_t tid = m.tid;
    if (m.flow && m.has_ts) {
      auto it = lane_at_.find({m.trace, m.pid, m.tid, m.ts});
      if (it != lane_at_.end() && it->second > 0) tid = TidOf({m.trace, m.pid, m.tid}, it->second);
    }
    *event = "{";
    for (auto f : obj) {
      std::string_view key, raw;
      simdjson::ondemand::value v;
      if (f.unescaped_key().get(key) || f.value().get(v)) return false;
      if (event->size() > 1) *event += ',';
      JsonWriter::AppendEscaped(*event, key);
      *event += ':';
      if (key == "pid") {
        *event += std::to_string(process_[{m.trace, m.pid}]);
      } else if (key == "tid" && tid != m.tid) {
        *event += std::to_string(tid);
      } else if (key == "ts" && m.has_ts) {
        *event += m.metadata ? "0" : Micros(m.ts - base_[m.trace]);
      } else if (key == "args" && !renamed.empty()) {
        *event += renamed;
        if (!RawValue(v, &raw)) return false;  // read past it
      } else {
        if (!RawValue(v, &raw)) return false;
        *event += raw;
      }
    }
    *event += '}';
    return true;
  }

  /// Complete events, each on its track or a sibling.
  Status WriteEvents() {
    auto q = db_.Prepare("SELECT args FROM events WHERE rowid = ?");
    if (!q.ok()) return q.status();
    for (size_t i = 0; i < rows_.size(); ++i) {
      const Row& r = rows_[i];
      int64_t pid = process_[{r.trace, r.pid}];
      int64_t tid = TidOf({r.trace, r.pid, r.tid}, lane_of_[i]);
      int64_t ts = r.ts - base_[r.trace];
      q->Reset();
      q->Bind(1, r.rowid);
      auto row = q->Step();
      if (!row.ok()) return row.status();
      const std::string_view args = *row ? q->Text(0) : std::string_view();
      Separator();
      out_ += "{\"ph\":\"X\",\"name\":";
      JsonWriter::AppendEscaped(out_, StringOf(r.name));
      if (std::string_view cat = r.cat < 0 ? std::string_view() : StringOf(r.cat); !cat.empty()) {
        // as the trace wrote it: an event without a category stays without one
        out_ += ",\"cat\":";
        JsonWriter::AppendEscaped(out_, cat);
      }
      out_ += ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + Micros(ts) +
              ",\"dur\":" + Micros(std::max<int64_t>(r.dur, 0));
      if (!args.empty()) {
        out_ += ",\"args\":";
        out_ += args;
      }
      out_ += "}";
      ++stats_->events;
      if (!has_flows_.count(r.trace) && r.launch_end) {
        where_[r.rowid] = {pid, tid};
        start_of_[r.rowid] = ts;
      }
      PORTKIT_RETURN_IF_ERROR(MaybeDrain());
    }
    return Status::Ok();
  }

  /// Launch flows (runtime call → device task) for traces that carry no flows of their own.
  Status WriteLaunchFlows() {
    auto q = db_.Prepare("SELECT kernel, launch FROM kernel_launches WHERE launch IS NOT NULL ORDER BY kernel");
    if (!q.ok()) return q.status();
    int64_t id = 0;
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      int64_t kernel = q->Int(0), launch = q->Int(1);
      auto k = where_.find(kernel), l = where_.find(launch);
      if (k == where_.end() || l == where_.end()) continue;
      std::string flow = ",\"id\":" + std::to_string(++id) + ",\"bp\":\"e\"}";
      Separator();
      out_ +=
          "{\"ph\":\"s\",\"name\":\"launch\",\"cat\":\"portkit_launch\",\"pid\":" + std::to_string(l->second.first) +
          ",\"tid\":" + std::to_string(l->second.second) + ",\"ts\":" + Micros(start_of_[launch]) + flow;
      Separator();
      out_ +=
          "{\"ph\":\"f\",\"name\":\"launch\",\"cat\":\"portkit_launch\",\"pid\":" + std::to_string(k->second.first) +
          ",\"tid\":" + std::to_string(k->second.second) + ",\"ts\":" + Micros(start_of_[kernel]) + flow;
      ++stats_->flows;
      PORTKIT_RETURN_IF_ERROR(MaybeDrain());
    }
    return Status::Ok();
  }

  sql::Database& db_;
  const TimelineSink& sink_;
  TimelineStats* stats_;
  bool first_event_ = true;
  std::unordered_map<int64_t, std::string> strings_;  // strings table: id → text
  simdjson::ondemand::parser parser_;
  std::vector<Row> rows_;
  std::vector<MarkRow> marks_;
  std::map<int64_t, std::string> trace_names_;
  std::set<int64_t> with_detail_;     // traces imported with schema 2 (args and marks kept)
  std::map<int64_t, int64_t> clock_;  // trace → baseTimeNanoseconds (traces that have one)
  bool several_traces_ = false;
  std::map<int64_t, int64_t> base_;                         // trace → what its timestamps lose on the timeline
  std::map<std::pair<int64_t, int64_t>, int64_t> process_;  // (trace, pid) → timeline pid
  std::map<std::pair<int64_t, int64_t>, int64_t> max_tid_;  // (trace, pid) → largest tid used
  std::set<std::pair<int64_t, int64_t>> named_process_;
  std::map<TrackKey, std::string> thread_names_;
  std::set<int64_t> has_flows_;
  std::vector<int32_t> lane_of_;                              // per row
  std::unordered_map<PointKey, int32_t, PointHash> lane_at_;  // flow binding points on moved lanes
  std::map<TrackKey, int32_t> lanes_of_track_;
  std::map<std::pair<TrackKey, int32_t>, int64_t> lane_tid_;  // (track, lane ≥ 1) → sibling tid
  std::map<int64_t, std::pair<int64_t, int64_t>> where_;      // rowid → (process, tid) for launch flows
  std::map<int64_t, int64_t> start_of_;                       // rowid → relative ts
  std::string out_;
};

}  // namespace

Status WriteTimeline(Store& store, const TimelineSink& sink, TimelineStats* stats) {
  return TimelineBuilder(store, sink, stats).Write();
}

Expected<std::string> BuildTimeline(Store& store, TimelineStats* stats) {
  std::string json;
  TimelineSink append = [&](std::string_view piece) {
    json += piece;
    return Status::Ok();
  };
  PORTKIT_RETURN_IF_ERROR(WriteTimeline(store, append, stats));
  return json;
}

}  // namespace portkit::prof
