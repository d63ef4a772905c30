// `prof export timeline` without loss: a real Kineto trace (HTA's ROCm sample, tests/data/traces/
// kineto, BSD licence beside it) and a hand-made one with counters and overlapping calls are
// imported and exported; every complete event keeps its name, category, exact duration and args,
// metadata (process and thread names), counters, instants and flows come back unchanged but for
// pid and ts, and overlapping events go to sibling tracks, never clipped.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "prof/exporters/timeline.h"
#include "prof/importers/chrome_trace.h"
#include "prof/store.h"
#include "store_schema_util.h"

namespace portkit::prof {
namespace {
namespace fs = std::filesystem;

const fs::path kKineto = fs::path(PORTKIT_TEST_DATA_DIR) / ".." / "tests" / "data" / "traces" / "kineto";

std::string ReadMaybeGzip(const fs::path& p) {
  gzFile f = gzopen(p.c_str(), "rb");
  std::string out;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

int64_t Ns(simdjson::dom::element v) {
  // Exactly as written: the raw number through the importer's own exact conversion.
  std::string text = simdjson::minify(v);
  int64_t ns = 0;
  EXPECT_TRUE(ParseMicrosToNanos(text, &ns)) << text;
  return ns;
}

std::string Str(simdjson::dom::element v) {
  std::string_view s;
  return v.get_string().get(s) ? simdjson::minify(v) : std::string(s);
}

std::string Field(simdjson::dom::object o, std::string_view key) {
  simdjson::dom::element v;
  return o[key].get(v) ? std::string("<none>") : simdjson::minify(v);
}

/// A trace's events in comparable form: complete events as (name, cat, ts from the first timed
/// event, dur, args); every other event as all its members but pid (and tid for flows), with ts
/// likewise relative.
struct Parsed {
  std::multiset<std::string> complete, other;
  std::map<std::string, int64_t> dur_by_name;  // the longest duration per name
  size_t flows = 0, counters = 0, instants = 0, metadata = 0;
  simdjson::dom::parser parser;  // owns the document
};

void Parse(const std::string& json, Parsed* out) {
  simdjson::dom::element doc;
  ASSERT_FALSE(out->parser.parse(json).get(doc));
  simdjson::dom::array events;
  simdjson::dom::object top;
  if (!doc.get_object().get(top)) ASSERT_FALSE(top["traceEvents"].get_array().get(events));
  else ASSERT_FALSE(doc.get_array().get(events));
  int64_t base = INT64_MAX;
  for (simdjson::dom::object e : events) {
    simdjson::dom::element ts;
    if (Field(e, "ph") != "\"M\"" && !e["ts"].get(ts)) base = std::min(base, Ns(ts));
  }
  for (simdjson::dom::object e : events) {
    std::string ph = Field(e, "ph");
    simdjson::dom::element ts;
    int64_t rel = e["ts"].get(ts) ? -1 : Ns(ts) - base;
    if (ph == "\"X\"") {
      int64_t dur = Ns(e["dur"].value());
      std::string name = Str(e["name"].value());
      out->complete.insert(name + "|" + Field(e, "cat") + "|" + std::to_string(rel) + "|" + std::to_string(dur) + "|" +
                           Field(e, "args"));
      auto& longest = out->dur_by_name[name];
      longest = std::max(longest, dur);
      continue;
    }
    std::string text = ph;
    for (auto [key, value] : e) {
      if (key == "pid" || key == "ph" || (key == "tid" && (ph == "\"s\"" || ph == "\"f\"" || ph == "\"t\""))) continue;
      text += "|" + std::string(key) + "=" +
              (key == "ts" ? (ph == "\"M\"" ? "" : std::to_string(rel)) : simdjson::minify(value));
    }
    out->other.insert(text);
    if (ph == "\"s\"" || ph == "\"f\"" || ph == "\"t\"") ++out->flows;
    if (ph == "\"C\"") ++out->counters;
    if (ph == "\"i\"" || ph == "\"I\"") ++out->instants;
    if (ph == "\"M\"") ++out->metadata;
  }
}

class Timeline : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_timeline_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Imports `trace` into a fresh store and exports its timeline.
  std::string RoundTrip(const fs::path& trace, TimelineStats* stats) {
    auto store = Store::Open(dir_ / "portkit.db");
    EXPECT_TRUE(store.ok());
    auto imported = ImportChromeTrace(trace, trace.filename().string(), "kineto", *store);
    EXPECT_TRUE(imported.ok()) << imported.status().message();
    auto json = BuildTimeline(*store, stats);
    EXPECT_TRUE(json.ok()) << json.status().message();
    return json.ok() ? *json : std::string();
  }

  fs::path dir_;
};

/// The "other" events of an export, without the process names portkit adds for unnamed
/// processes and the thread names of sibling tracks.
std::multiset<std::string> TraceOwn(const Parsed& p) {
  std::multiset<std::string> out;
  for (const auto& o : p.other)
    if (o.find("(overlap ") == std::string::npos && o.find(" pid ") == std::string::npos) out.insert(o);
  return out;
}

TEST_F(Timeline, ARealKinetoTraceComesBackWithArgsNamesInstantsAndFlows) {
  const fs::path trace = kKineto / "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz";
  Parsed before, after;
  Parse(ReadMaybeGzip(trace), &before);
  TimelineStats stats;
  std::string json = RoundTrip(trace, &stats);
  Parse(json, &after);
  // What the trace holds (counted from the file): flows, fwdbwd and ac2g; names; instants.
  ASSERT_EQ(before.flows, 45u);
  ASSERT_EQ(before.metadata, 60u);
  ASSERT_EQ(before.instants, 2u);
  EXPECT_EQ(after.complete, before.complete);  // names, categories, times, durations, args
  EXPECT_EQ(TraceOwn(after), before.other);    // metadata, instants, flows
  EXPECT_EQ(stats.events, before.complete.size());
  EXPECT_EQ(stats.marks, before.other.size());
  EXPECT_EQ(stats.flows, 0u);  // the trace has its own flows: none made up
  EXPECT_NE(json.find("\"fwdbwd\""), std::string::npos);
  EXPECT_NE(json.find("\"ac2g\""), std::string::npos);
  EXPECT_NE(json.find("\"grid\""), std::string::npos);
}

TEST_F(Timeline, EveryReferenceTraceKeepsItsEventsAndDurations) {
  for (const char* name :
       {"critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
        "cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz",
        "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", "triton_example__triton_example.json.gz"}) {
    SCOPED_TRACE(name);
    Parsed before, after;
    Parse(ReadMaybeGzip(kKineto / name), &before);
    TimelineStats stats;
    Parse(RoundTrip(kKineto / name, &stats), &after);
    EXPECT_EQ(after.complete, before.complete);
    EXPECT_EQ(TraceOwn(after), before.other);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
}

TEST_F(Timeline, WrittenInBoundedPiecesThatMakeTheWholeText) {
  // The export streams: its pieces are ~1 MiB each (never the whole text at once), their
  // concatenation is the text BuildTimeline returns, and a failing sink ends the export.
  const fs::path trace = kKineto / "timeline_analysis__sampled_rank-0.json.gz";
  TimelineStats whole_stats;
  const std::string whole = RoundTrip(trace, &whole_stats);
  ASSERT_GT(whole.size(), size_t{1} << 20);
  auto store = Store::OpenForReading(dir_ / "portkit.db");
  ASSERT_TRUE(store.ok());
  std::string joined;
  std::vector<size_t> sizes;
  TimelineStats stats;
  ASSERT_TRUE(WriteTimeline(
                  *store,
                  [&](std::string_view piece) {
                    sizes.push_back(piece.size());
                    joined += piece;
                    return Status::Ok();
                  },
                  &stats)
                  .ok());
  EXPECT_EQ(joined, whole);
  EXPECT_EQ(stats.events, whole_stats.events);
  EXPECT_EQ(stats.marks, whole_stats.marks);
  ASSERT_GE(sizes.size(), 2u);
  for (size_t n : sizes) EXPECT_LT(n, size_t{(1 << 20) + (64 << 10)});
  int calls = 0;
  Status failed = WriteTimeline(
      *store, [&](std::string_view) { return ++calls == 2 ? IoError("disk full") : Status::Ok(); }, &stats);
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("disk full"), std::string::npos);
  EXPECT_EQ(calls, 2);  // nothing is written after the error
}

TEST_F(Timeline, CountersAndOverlapsOnSiblingTracksNeverClipped) {
  // A 17,230 µs synchronize that overlaps a later call on the same thread without nesting, two
  // kernels overlapping on one stream, a counter track, a flow ending at the moved call, and the
  // thread's name.
  const fs::path trace = dir_ / "overlap.json";
  std::ofstream(trace) << R"({"traceEvents": [
 {"ph": "M", "name": "thread_name", "pid": 1, "tid": 5, "args": {"name": "main thread"}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 5, "ts": 1000, "dur": 17230, "args": {"correlation": 7}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 5, "ts": 15000, "dur": 4000.5, "args": {"Input Dims": [[4, 4]]}},
 {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 2000, "dur": 100, "args": {"stream": 7, "grid": [1, 2, 3]}},
 {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 2050, "dur": 100, "args": {"stream": 7}},
 {"ph": "C", "name": "Memory", "pid": 1, "tid": 0, "ts": 1500, "args": {"allocated": 1024, "reserved": 2048}},
 {"ph": "C", "name": "Memory", "pid": 1, "tid": 0, "ts": 2500, "args": {"allocated": 0, "reserved": 2048}},
 {"ph": "i", "name": "mark", "s": "t", "pid": 1, "tid": 5, "ts": 1200, "args": {}},
 {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 1, "tid": 5, "ts": 1000},
 {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 1, "tid": 5, "ts": 15000, "bp": "e"}
]})";
  Parsed before, after;
  {
    std::ifstream in(trace);
    Parse(std::string(std::istreambuf_iterator<char>(in), {}), &before);
  }
  TimelineStats stats;
  std::string json = RoundTrip(trace, &stats);
  Parse(json, &after);
  EXPECT_EQ(after.complete, before.complete);
  EXPECT_EQ(TraceOwn(after), before.other);
  EXPECT_EQ(after.counters, 2u);
  EXPECT_EQ(after.dur_by_name.at("cudaDeviceSynchronize"), 17'230'000);  // ns: not clipped
  EXPECT_EQ(after.dur_by_name.at("aten::copy_"), 4'000'500);
  EXPECT_EQ(stats.moved, 2u);  // aten::copy_ and k2
  EXPECT_EQ(stats.sibling_tracks, 2u);
  EXPECT_NE(json.find("\"main thread (overlap 1)\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"tid 7 (overlap 1)\""), std::string::npos) << json;
  // Every track nests, and the flow's end moved with aten::copy_ to its sibling track.
  simdjson::dom::parser p;
  simdjson::dom::element doc = p.parse(json).value();
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> tracks;
  int64_t copy_tid = -1, flow_end_tid = -2;
  // The array is held by name: value() of a temporary simdjson_result returns a reference into it,
  // which a range-for over the whole expression would use after the temporary is gone.
  simdjson::dom::array events = doc["traceEvents"].get_array().value();
  for (simdjson::dom::object e : events) {
    std::string ph = Field(e, "ph");
    int64_t tid = e["tid"].get_int64().value();
    if (ph == "\"X\"") {
      int64_t ts = Ns(e["ts"].value()), end = ts + Ns(e["dur"].value());
      tracks[{e["pid"].get_int64().value(), tid}].push_back({ts, end});
      if (Str(e["name"].value()) == "aten::copy_") copy_tid = tid;
    }
    if (ph == "\"f\"") flow_end_tid = tid;
  }
  EXPECT_NE(copy_tid, 5);
  EXPECT_EQ(flow_end_tid, copy_tid);
  for (auto& [track, spans] : tracks) {
    std::sort(spans.begin(), spans.end(),
              [](auto a, auto b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<int64_t> open;
    for (auto [start, end] : spans) {
      while (!open.empty() && open.back() <= start) open.pop_back();
      EXPECT_TRUE(open.empty() || end <= open.back()) << "overlap on track " << track.second;
      open.push_back(end);
    }
  }
}

TEST_F(Timeline, AStoreOfSchemaOneIsMigratedAndItsTracesSaidToLackDetail) {
  // Schema 1: no args column, no marks table.
  {
    auto store = Store::Open(dir_ / "portkit.db");
    ASSERT_TRUE(store.ok());
    auto w = store->BeginTrace("old.json", "kineto");
    ASSERT_TRUE(w.ok());
    Event e;
    e.kind = EventKind::kCpuOp;
    e.name = "aten::mm";
    e.category = "cpu_op";
    e.dur_ns = 5;
    ASSERT_TRUE(w->AddEvent(e).ok());
    ASSERT_TRUE(w->Finish(1, 0, "").ok());
    ASSERT_TRUE(store->db()
                    .Exec("UPDATE traces SET marks = NULL; DROP TABLE marks; ALTER TABLE events DROP COLUMN args; "
                          "ALTER TABLE traces DROP COLUMN marks; " +
                          std::string(testing::kUndoSchemaThreeLaunch) + "PRAGMA user_version = 1;")
                    .ok());
  }
  auto reader = Store::OpenForReading(dir_ / "portkit.db");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_EQ(*reader->db().UserVersion(), kStoreSchemaVersion);
  TimelineStats stats;
  auto json = BuildTimeline(*reader, &stats);
  ASSERT_TRUE(json.ok()) << json.status().message();
  EXPECT_EQ(stats.events, 1u);
  EXPECT_EQ(stats.without_detail, 1u);
}

}  // namespace
}  // namespace portkit::prof
