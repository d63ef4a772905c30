#include "prof/exporters/summary.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <unordered_set>
#include <vector>

namespace portkit::prof {

std::string Micros(int64_t ns) {
  bool neg = ns < 0;
  uint64_t v = static_cast<uint64_t>(neg ? -ns : ns);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s%llu.%03llu", neg ? "-" : "", static_cast<unsigned long long>(v / 1000),
                static_cast<unsigned long long>(v % 1000));
  return buf;
}

namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// Runs `sql` and turns every row into strings with `row_fn`.
template <typename RowFn>
Status Query(Store& store, const std::string& sql, RowFn row_fn) {
  return sql::ForEachRow(store.db(), sql, row_fn);
}

std::string Text(const sql::Statement& q, int col) { return std::string(q.Text(col)); }

// Statistics over durations grouped by a key: count, total, avg, min, max and variance (ns²,
// from sums computed in SQLite's 64-bit integers and a double for the squares).
/// SQL for the value of `key` in the args of the Ascend event `e` (kernel_details' columns, kept as
/// args by its importer; trace_view's `Task Type`), NULL elsewhere or when absent. `t` is the
/// event's row of `traces`.
std::string AscendArg(const std::string& e, const std::string& t, const std::string& key) {
  return "(CASE WHEN " + t + ".format LIKE 'ascend_pt%' AND json_valid(" + e + ".args) THEN json_extract(" + e +
         ".args, '$.\"" + key + "\"') END)";
}

/// SQL for msprof's Core Type / Task Type of device task `e`: the accelerator core of an Ascend
/// task (AI_CORE, AI_VECTOR_CORE, AI_CPU, HCCL, ...), else KERNEL, MEMCPY or MEMSET.
std::string CoreTypeSql(const std::string& e, const std::string& t) {
  return "COALESCE(" + AscendArg(e, t, "Accelerator Core") + ", " + AscendArg(e, t, "Task Type") + ", CASE " + e +
         ".kind WHEN 'kernel' THEN 'KERNEL' WHEN 'gpu_memcpy' THEN 'MEMCPY' ELSE 'MEMSET' END)";
}

constexpr const char* kStatColumns = "COUNT(*), SUM(e.dur), MIN(e.dur), MAX(e.dur), SUM(CAST(e.dur AS REAL) * e.dur)";

/// A share of the device time in percent ("0.00" when there is none).
std::string Ratio(int64_t total, int64_t device_total) {
  return device_total > 0 ? Fixed(100.0 * static_cast<double>(total) / static_cast<double>(device_total), 2) : "0.00";
}

/// Count, total, avg, min, max of the kStatColumns at `first`, then the ratio to `device_total`
/// (`with_ratio`) or the variance in µs².
std::vector<std::string> StatCells(const sql::Statement& q, int first, bool with_ratio, int64_t device_total) {
  int64_t count = q.Int(first), total = q.Int(first + 1);
  int64_t mn = q.Int(first + 2), mx = q.Int(first + 3);
  double sq = q.Double(first + 4);
  double mean = count ? static_cast<double>(total) / static_cast<double>(count) : 0;
  double var = count ? std::max(0.0, sq / static_cast<double>(count) - mean * mean) : 0;
  std::vector<std::string> r = {std::to_string(count), Micros(total), Fixed(mean / 1000.0, 3), Micros(mn), Micros(mx)};
  if (with_ratio) r.push_back(Ratio(total, device_total));
  else r.push_back(Fixed(var / 1e6, 3));  // µs²
  return r;
}

/// op_summary: one row per device task with the CPU op that launched it.
/// msprof's columns (FORMATS.md §3) after our Trace column; what a trace does not record (formats,
/// output shapes and types) stays empty rather than guessed.
Expected<SummaryTable> OpSummary(Store& store) {
  SummaryTable op_summary{
      "op_summary",
      {"Trace", "Device_id", "Stream", "Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)",
       "Task Wait Time(us)", "Block Num", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
       "Output Data Types", "Output Formats"},
      {},
      {false, true, true, false, false, false, true, true, true, true, false, false, false, false, false, false}};
  int64_t prev_end = -1;
  std::string prev_key;
  PORTKIT_RETURN_IF_ERROR(
      Query(store,
            "SELECT t.path, k.pid, k.tid, ks.value, COALESCE(" + AscendArg("k", "t", "Type") + ", cs.value, ''), " +
                CoreTypeSql("k", "t") +
                ", k.ts, k.dur, "
                "k.grid_x * k.grid_y * k.grid_z, COALESCE(c.input_dims, k.input_dims, ''), "
                "COALESCE(c.input_types, k.input_types, ''), COALESCE(" +
                AscendArg("k", "t", "Input Formats") +
                ", ''), "
                "COALESCE(" +
                AscendArg("k", "t", "Output Shapes") + ", ''), COALESCE(" + AscendArg("k", "t", "Output Data Types") +
                ", ''), COALESCE(" + AscendArg("k", "t", "Output Formats") +
                ", '') "
                "FROM events k JOIN traces t ON t.id = k.trace JOIN strings ks ON ks.id = k.name "
                "LEFT JOIN kernel_launches l ON l.kernel = k.rowid "
                "LEFT JOIN events c ON c.rowid = l.cpu_op LEFT JOIN strings cs ON cs.id = c.name "
                "WHERE k.kind IN ('kernel', 'gpu_memcpy', 'gpu_memset') ORDER BY t.path, k.pid, k.tid, k.ts",
            [&](const sql::Statement& q) {
              std::string key = Text(q, 0) + "/" + Text(q, 1) + "/" + Text(q, 2);
              int64_t ts = q.Int(6), dur = q.Int(7);
              int64_t wait = key == prev_key && prev_end >= 0 && ts > prev_end ? ts - prev_end : 0;
              prev_key = key;
              prev_end = ts + dur;
              op_summary.rows.push_back({Text(q, 0), Text(q, 1), Text(q, 2), Text(q, 3), Text(q, 4), Text(q, 5),
                                         Micros(ts), Micros(dur), Micros(wait), q.IsNull(8) ? "" : Text(q, 8),
                                         Text(q, 9), Text(q, 10), Text(q, 11), Text(q, 12), Text(q, 13), Text(q, 14)});
            }));
  return op_summary;
}

/// op_statistic: device time per launching operator (OP Type) and core type.
Expected<SummaryTable> OpStatistic(Store& store, int64_t device_total) {
  SummaryTable op_stat{
      "op_statistic",
      {"OP Type", "Core Type", "Count", "Total Time(us)", "Avg Time(us)", "Min Time(us)", "Max Time(us)", "Ratio(%)"},
      {},
      {false, false, true, true, true, true, true, true}};
  PORTKIT_RETURN_IF_ERROR(
      Query(store,
            "SELECT COALESCE(" + AscendArg("e", "t", "Type") + ", cs.value, '(no CPU op)'), " + CoreTypeSql("e", "t") +
                ", " + kStatColumns +
                " FROM events e JOIN traces t ON t.id = e.trace LEFT JOIN kernel_launches l ON l.kernel = e.rowid "
                "LEFT JOIN events c ON c.rowid = l.cpu_op LEFT JOIN strings cs ON cs.id = c.name "
                "WHERE e.kind IN ('kernel', 'gpu_memcpy', 'gpu_memset') GROUP BY 1, 2 ORDER BY SUM(e.dur) DESC, 1, 2",
            [&](const sql::Statement& q) {
              std::vector<std::string> r = {Text(q, 0), Text(q, 1)};
              auto s = StatCells(q, 2, true, device_total);
              r.insert(r.end(), s.begin(), s.end());
              op_stat.rows.push_back(std::move(r));
            }));
  return op_stat;
}

/// kernel_statistic: per kernel name.
Expected<SummaryTable> KernelStatistic(Store& store, int64_t device_total) {
  SummaryTable kernel_stat{
      "kernel_statistic",
      {"Kernel Name", "Count", "Total Time(us)", "Avg Time(us)", "Min Time(us)", "Max Time(us)", "Ratio(%)"},
      {},
      {false, true, true, true, true, true, true}};
  PORTKIT_RETURN_IF_ERROR(
      Query(store,
            (std::string("SELECT s.value, ") + kStatColumns +
             " FROM events e JOIN strings s ON s.id = e.name WHERE e.kind = 'kernel' GROUP BY s.value "
             "ORDER BY SUM(e.dur) DESC, s.value"),
            [&](const sql::Statement& q) {
              std::vector<std::string> r = {Text(q, 0)};
              auto s = StatCells(q, 1, true, device_total);
              r.insert(r.end(), s.begin(), s.end());
              kernel_stat.rows.push_back(std::move(r));
            }));
  return kernel_stat;
}

/// api_statistic: runtime and driver calls (msprof's columns; Time = total).
Expected<SummaryTable> ApiStatistic(Store& store) {
  SummaryTable api_stat{"api_statistic",
                        {"Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"},
                        {},
                        {false, false, true, true, true, true, true, true}};
  PORTKIT_RETURN_IF_ERROR(
      Query(store,
            (std::string("SELECT e.kind, s.value, ") + kStatColumns +
             " FROM events e JOIN strings s ON s.id = e.name WHERE e.kind IN ('runtime', 'driver', 'sync') "
             "GROUP BY e.kind, s.value ORDER BY SUM(e.dur) DESC, 1, 2"),
            [&](const sql::Statement& q) {
              auto s = StatCells(q, 2, false, 0);  // count, total, avg, min, max, variance
              api_stat.rows.push_back({Text(q, 0), Text(q, 1), s[1], s[0], s[2], s[3], s[4], s[5]});
            }));
  return api_stat;
}

/// task_time: one row per device task (msprof's columns). task_id is the trace's correlation id
/// where it records one.
Expected<SummaryTable> TaskTime(Store& store) {
  SummaryTable task_time{
      "task_time",
      {"kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)", "task_start(us)", "task_stop(us)"},
      {},
      {false, false, true, true, true, true, true}};
  PORTKIT_RETURN_IF_ERROR(
      Query(store,
            "SELECT s.value, e.kind, e.tid, e.correlation, e.dur, e.ts FROM events e JOIN strings s ON s.id = e.name "
            "JOIN traces t ON t.id = e.trace WHERE e.kind IN ('kernel', 'gpu_memcpy', 'gpu_memset') "
            "ORDER BY t.path, e.ts, e.tid",
            [&](const sql::Statement& q) {
              std::string kind = Text(q, 1);
              int64_t dur = q.Int(4), ts = q.Int(5);
              task_time.rows.push_back({Text(q, 0),
                                        kind == "kernel"       ? "KERNEL"
                                        : kind == "gpu_memcpy" ? "MEMCPY"
                                                               : "MEMSET",
                                        Text(q, 2), q.IsNull(3) || q.Int(3) < 0 ? "" : Text(q, 3), Micros(dur),
                                        Micros(ts), Micros(ts + dur)});
            }));
  return task_time;
}

/// One ProfilerStep#N of a trace.
struct StepSpan {
  int64_t trace;
  std::string path, id;
  int64_t start, end;
};

constexpr int64_t kNone = INT64_MIN;

/// The first device task, first host operator and last backward end in each step (kNone: none).
struct StepBounds {
  std::vector<int64_t> fp_device, fp_host, bp;
};

/// The steps of every trace: one row per trace and step.
Expected<std::vector<StepSpan>> StepSpans(Store& store) {
  std::vector<StepSpan> spans;
  PORTKIT_RETURN_IF_ERROR(
      Query(store,
            // A step can be both a cpu_op and a user_annotation: one row per trace and step.
            "SELECT t.id, t.path, s.value, MIN(e.ts), MAX(e.ts + e.dur) FROM events e JOIN strings s ON s.id = e.name "
            "JOIN traces t ON t.id = e.trace WHERE e.kind = 'step' GROUP BY t.path, s.value ORDER BY t.path, MIN(e.ts)",
            [&](const sql::Statement& q) {
              std::string name = Text(q, 2);
              spans.push_back({q.Int(0), Text(q, 1), name.substr(name.find('#') + 1), q.Int(3), q.Int(4)});
            }));
  return spans;
}

/// FP start and BP end of every step in one pass over the events (not a query per step, which
/// needs an index on time to stay linear): each event is placed in the steps of its trace that
/// contain its start, found by binary search over the steps sorted by start.
Expected<StepBounds> FindStepBounds(Store& store, const std::vector<StepSpan>& spans) {
  StepBounds b{std::vector<int64_t>(spans.size(), kNone), std::vector<int64_t>(spans.size(), kNone),
               std::vector<int64_t>(spans.size(), kNone)};
  if (spans.empty()) return b;
  struct Window {
    std::vector<size_t> order;   // span indexes by start
    std::vector<int64_t> reach;  // the latest end among order[0..j]
  };
  std::map<int64_t, Window> windows;  // trace → its steps
  for (size_t i = 0; i < spans.size(); ++i) windows[spans[i].trace].order.push_back(i);
  for (auto& [trace, w] : windows) {
    std::sort(w.order.begin(), w.order.end(), [&](size_t a, size_t c) { return spans[a].start < spans[c].start; });
    int64_t reach = INT64_MIN;
    for (size_t i : w.order) w.reach.push_back(reach = std::max(reach, spans[i].end));
  }
  std::unordered_set<int64_t> backward_names;
  PORTKIT_RETURN_IF_ERROR(Query(store,
                                "SELECT id FROM strings WHERE value LIKE '%backward%' OR value LIKE '%backprop%'",
                                [&](const sql::Statement& q) { backward_names.insert(q.Int(0)); }));
  PORTKIT_RETURN_IF_ERROR(Query(store,
                                "SELECT trace, kind = 'cpu_op', ts, dur, name FROM events "
                                "WHERE kind IN ('cpu_op', 'kernel', 'gpu_memcpy', 'gpu_memset')",
                                [&](const sql::Statement& q) {
                                  auto w = windows.find(q.Int(0));
                                  if (w == windows.end()) return;
                                  const bool host = q.Int(1) != 0;
                                  const int64_t ts = q.Int(2), end = ts + q.Int(3);
                                  const bool backward = backward_names.count(q.Int(4)) > 0;
                                  const auto& order = w->second.order;
                                  // The steps starting at or before ts, latest first, while one of them may still hold
                                  // ts.
                                  auto j = static_cast<size_t>(
                                      std::upper_bound(order.begin(), order.end(), ts,
                                                       [&](int64_t t, size_t i) { return t < spans[i].start; }) -
                                      order.begin());
                                  while (j > 0 && w->second.reach[j - 1] > ts) {
                                    const size_t i = order[--j];
                                    if (ts >= spans[i].end) continue;
                                    int64_t& fp = host ? b.fp_host[i] : b.fp_device[i];
                                    if (fp == kNone || ts < fp) fp = ts;
                                    if (backward && (b.bp[i] == kNone || end > b.bp[i])) b.bp[i] = end;
                                  }
                                }));
  return b;
}

/// step_trace: ProfilerStep#N spans with msprof's columns. FP Start: the first device task in the
/// step (the first host operator when the profile has no device tasks); BP End: the end of the
/// last backward event (a name containing "backward" or "backprop", any case) in the step, empty
/// when the step has none (inference). docs/prof.md.
Expected<SummaryTable> StepTrace(Store& store) {
  SummaryTable step_trace{"step_trace",
                          {"Trace", "Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)",
                           "Iteration Time(us)", "Iteration Start(us)"},
                          {},
                          {false, true, true, true, true, true, true}};
  auto spans = StepSpans(store);
  if (!spans.ok()) return spans.status();
  auto bounds = FindStepBounds(store, *spans);
  if (!bounds.ok()) return bounds.status();
  for (size_t i = 0; i < spans->size(); ++i) {
    const StepSpan& sp = (*spans)[i];
    const int64_t fp = bounds->fp_device[i] != kNone ? bounds->fp_device[i] : bounds->fp_host[i];
    const int64_t bp = bounds->bp[i];
    step_trace.rows.push_back({sp.path, sp.id, fp == kNone ? "" : Micros(fp), bp == kNone ? "" : Micros(bp),
                               Micros(sp.end), Micros(sp.end - sp.start), Micros(sp.start)});
  }
  return step_trace;
}

}  // namespace

Expected<std::vector<SummaryTable>> BuildSummaries(Store& store) {
  int64_t device_total = 0;
  PORTKIT_RETURN_IF_ERROR(
      Query(store, "SELECT COALESCE(SUM(dur), 0) FROM events WHERE kind IN ('kernel', 'gpu_memcpy', 'gpu_memset')",
            [&](const sql::Statement& q) { device_total = q.Int(0); }));
  // Built in this order (the order of their queries); listed in msprof's.
  auto op_summary = OpSummary(store);
  if (!op_summary.ok()) return op_summary.status();
  auto op_stat = OpStatistic(store, device_total);
  if (!op_stat.ok()) return op_stat.status();
  auto kernel_stat = KernelStatistic(store, device_total);
  if (!kernel_stat.ok()) return kernel_stat.status();
  auto api_stat = ApiStatistic(store);
  if (!api_stat.ok()) return api_stat.status();
  auto task_time = TaskTime(store);
  if (!task_time.ok()) return task_time.status();
  auto step_trace = StepTrace(store);
  if (!step_trace.ok()) return step_trace.status();
  std::vector<SummaryTable> out;
  out.push_back(std::move(*op_summary));
  out.push_back(std::move(*op_stat));
  out.push_back(std::move(*api_stat));
  out.push_back(std::move(*kernel_stat));
  out.push_back(std::move(*task_time));
  out.push_back(std::move(*step_trace));
  return out;
}

}  // namespace portkit::prof
