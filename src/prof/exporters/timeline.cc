#include "prof/exporters/timeline.h"

#include <map>
#include <vector>

#include "core/json_writer.h"
#include "prof/exporters/summary.h"

namespace portkit::prof {
namespace {

struct Row {
  int64_t trace, pid, tid, ts, dur, rowid;
  std::string name, cat, kind;
};

void AppendEvent(std::string& out, const char* ph, const std::string& name, const std::string& cat,
                 int64_t pid, int64_t tid, int64_t rel_ts_ns, int64_t dur_ns, const std::string& extra) {
  out += out.back() == '[' ? "\n" : ",\n";
  out += "{\"ph\":\"";
  out += ph;
  out += "\",\"name\":";
  JsonWriter::AppendEscaped(out, name);
  out += ",\"cat\":";
  JsonWriter::AppendEscaped(out, cat);
  out += ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + Micros(rel_ts_ns);
  if (dur_ns >= 0) out += ",\"dur\":" + Micros(dur_ns);
  out += extra;
  out += "}";
}

}  // namespace

Expected<std::string> BuildTimeline(Store& store, TimelineStats* stats) {
  sql::Database& db = store.db();
  std::vector<Row> rows;
  {
    auto q = db.Prepare(
        "SELECT e.trace, e.pid, e.tid, e.ts, e.dur, e.rowid, s.value, c.value, e.kind "
        "FROM events e JOIN strings s ON s.id = e.name LEFT JOIN strings c ON c.id = e.category "
        "ORDER BY e.trace, e.pid, e.tid, e.ts, e.dur DESC");
    if (!q.ok()) return q.status();
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      rows.push_back({q->Int(0), q->Int(1), q->Int(2), q->Int(3), q->Int(4), q->Int(5), std::string(q->Text(6)),
                      std::string(q->Text(7)), std::string(q->Text(8))});
    }
  }
  // Per trace: the earliest timestamp (the timeline's zero) and a process id per (trace, pid).
  std::map<int64_t, int64_t> base;
  for (const auto& r : rows) {
    auto it = base.find(r.trace);
    if (it == base.end() || r.ts < it->second) base[r.trace] = r.ts;
  }
  std::map<std::pair<int64_t, int64_t>, int64_t> process;
  std::map<int64_t, std::string> trace_names;
  {
    auto q = db.Prepare("SELECT id, path FROM traces");
    if (!q.ok()) return q.status();
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      trace_names[q->Int(0)] = std::string(q->Text(1));
    }
  }
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  std::map<int64_t, std::pair<int64_t, int64_t>> where;  // rowid → (process, tid) for flows
  std::map<int64_t, int64_t> start_of;                   // rowid → relative ts
  // Legalise nesting per track with a stack of open intervals: an event that starts inside the top
  // interval but ends after it is clipped to the top's end.
  int64_t cur_trace = -1, cur_pid = 0, cur_tid = 0;
  std::vector<int64_t> open_ends;
  for (const auto& r : rows) {
    auto key = std::make_pair(r.trace, r.pid);
    auto [it, fresh] = process.emplace(key, static_cast<int64_t>(process.size()) + 1);
    if (fresh) {
      std::string pname = trace_names[r.trace] + " pid " + std::to_string(r.pid);
      AppendEvent(out, "M", "process_name", "__metadata", it->second, 0, 0, -1,
                  ",\"args\":{\"name\":" + [&] { std::string s; JsonWriter::AppendEscaped(s, pname); return s; }() + "}");
    }
    if (r.trace != cur_trace || r.pid != cur_pid || r.tid != cur_tid) {
      open_ends.clear();
      cur_trace = r.trace, cur_pid = r.pid, cur_tid = r.tid;
    }
    int64_t ts = r.ts - base[r.trace];
    int64_t dur = r.dur < 0 ? 0 : r.dur;
    while (!open_ends.empty() && open_ends.back() <= ts) open_ends.pop_back();
    if (!open_ends.empty() && ts + dur > open_ends.back()) {
      dur = open_ends.back() - ts;
      ++stats->clipped;
    }
    open_ends.push_back(ts + dur);
    AppendEvent(out, "X", r.name, r.cat.empty() ? r.kind : r.cat, it->second, r.tid, ts, dur, "");
    ++stats->events;
    where[r.rowid] = {it->second, r.tid};
    start_of[r.rowid] = ts;
  }
  // Launch flows: runtime call → device task.
  auto q = db.Prepare("SELECT kernel, launch FROM kernel_launches WHERE launch IS NOT NULL");
  if (!q.ok()) return q.status();
  int64_t id = 0;
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    int64_t kernel = q->Int(0), launch = q->Int(1);
    auto k = where.find(kernel), l = where.find(launch);
    if (k == where.end() || l == where.end()) continue;
    std::string flow = ",\"id\":" + std::to_string(++id) + ",\"bp\":\"e\"";
    AppendEvent(out, "s", "launch", "ac2g", l->second.first, l->second.second, start_of[launch], -1, flow);
    AppendEvent(out, "f", "launch", "ac2g", k->second.first, k->second.second, start_of[kernel], -1, flow);
    ++stats->flows;
  }
  out += "\n]}\n";
  return out;
}

}  // namespace portkit::prof
