#include "prof/diff.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

namespace portkit::prof {
namespace {

Status Collect(Store& store, const char* sql, std::vector<std::pair<std::string, int64_t>>* out) {
  return sql::ForEachRow(store.db(), sql,
                         [out](sql::Statement& q) { out->emplace_back(std::string(q.Text(0)), q.Int(1)); });
}

/// The first row of `sql` through `row_fn`; nothing when there is no row.
template <typename RowFn>
Status FirstRow(Store& store, const std::string& sql, RowFn row_fn) {
  auto q = store.db().Prepare(sql);
  if (!q.ok()) return q.status();
  auto row = q->Step();
  if (!row.ok()) return row.status();
  if (*row) row_fn(*q);
  return Status::Ok();
}

// The distinct steps of each trace, ProfilerStep#0 of a trace with later steps (the warm-up) left
// out: the same steps ComputeTotals averages.
constexpr const char* kMeasuredSteps =
    "SELECT trace, MIN(ts), MAX(ts + dur), MIN(tid) FROM (SELECT e.trace AS trace, s.value AS name, e.ts AS ts, "
    "e.dur AS dur, e.tid AS tid "
    "FROM events e JOIN strings s ON s.id = e.name WHERE e.kind = 'step') "
    "GROUP BY trace, name HAVING NOT (name = 'ProfilerStep#0' AND trace IN (SELECT e.trace FROM events e "
    "JOIN strings s ON s.id = e.name WHERE e.kind = 'step' AND s.value <> 'ProfilerStep#0')) ORDER BY 1, 2, 3";

struct StepSpan {
  int64_t trace, begin, end;
  size_t index;     // into StepSeries::step_ns
  int64_t tid = 0;  // the thread that marks the step
};

/// Adds each row's duration of `sql` (trace, ts, key, dur) to the step its ts falls in.
Status AddPerStep(Store& store, const char* sql, const std::vector<StepSpan>& spans,
                  std::map<std::string, std::vector<double>>* out) {
  std::unordered_map<std::string, std::vector<double>> sums;
  const size_t steps = spans.size();
  PORTKIT_RETURN_IF_ERROR(sql::ForEachRow(store.db(), sql, [&](sql::Statement& q) {
    const int64_t trace = q.Int(0), ts = q.Int(1);
    // The last span starting at or before (trace, ts).
    auto it = std::upper_bound(spans.begin(), spans.end(), std::pair{trace, ts},
                               [](const std::pair<int64_t, int64_t>& v, const StepSpan& s) {
                                 return v.first != s.trace ? v.first < s.trace : v.second < s.begin;
                               });
    if (it == spans.begin()) return;
    --it;
    if (it->trace != trace || ts >= it->end) return;
    auto& row = sums[std::string(q.Text(2))];
    if (row.empty()) row.assign(steps, 0.0);
    row[it->index] += static_cast<double>(q.Int(3));
  }));
  for (auto& [key, row] : sums) (*out)[key] = std::move(row);
  return Status::Ok();
}

constexpr const char* kPositionKey = "(step start)";

/// Cuts each step into its positions (StepSeries::positions) from the CPU ops of its thread.
class PositionCutter {
 public:
  PositionCutter(const std::vector<StepSpan>& spans, std::map<std::string, std::vector<double>>* out)
      : spans_(spans), state_(spans.size()), out_(out) {
    for (const auto& s : spans) by_thread_[{s.trace, s.tid}].push_back(s.index);
  }

  /// One CPU op; ops of a thread come in start order (the longer first at one start).
  void Add(int64_t trace, int64_t tid, int64_t ts, int64_t dur, std::string_view name) {
    auto list = by_thread_.find({trace, tid});
    if (list == by_thread_.end()) return;
    const auto& steps = list->second;
    auto it = std::upper_bound(steps.begin(), steps.end(), ts,
                               [this](int64_t v, size_t step) { return v < spans_[step].begin; });
    if (it == steps.begin()) return;
    const StepSpan& span = spans_[*std::prev(it)];
    if (ts >= span.end) return;
    State& st = state_[span.index];
    if (st.started && ts < st.top_end) return;  // inside the current top-level op
    Close(span, &st, ts);
    st.key.assign(name);
    st.key += '#' + std::to_string(st.counts[std::string(name)]++);
    st.start = ts;
    st.top_end = ts + dur;
    st.started = true;
  }

  /// Closes every step's last position at the step's end.
  void Finish() {
    for (const auto& span : spans_) Close(span, &state_[span.index], span.end);
  }

 private:
  struct State {
    bool started = false;
    int64_t start = 0, top_end = 0;
    std::string key;
    std::unordered_map<std::string, int> counts;
  };

  void Close(const StepSpan& span, State* st, int64_t until) {
    const std::string& key = st->started ? st->key : std::string(kPositionKey);
    const int64_t from = st->started ? st->start : span.begin;
    auto& row = (*out_)[key];
    if (row.empty()) row.assign(spans_.size(), 0.0);
    row[span.index] += static_cast<double>(std::max<int64_t>(0, until - from));
  }

  const std::vector<StepSpan>& spans_;
  std::vector<State> state_;
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> by_thread_;  // steps by begin
  std::map<std::string, std::vector<double>>* out_;
};

Status AddPositions(Store& store, const std::vector<StepSpan>& spans, std::map<std::string, std::vector<double>>* out) {
  PositionCutter cutter(spans, out);
  PORTKIT_RETURN_IF_ERROR(sql::ForEachRow(
      store.db(),
      "SELECT e.trace, COALESCE(e.tid, 0), e.ts, e.dur, s.value FROM events e JOIN strings s ON s.id = e.name "
      "WHERE e.kind = 'cpu_op' AND s.value NOT LIKE 'ProfilerStep#%' ORDER BY 1, 2, 3, 4 DESC",
      [&](sql::Statement& q) { cutter.Add(q.Int(0), q.Int(1), q.Int(2), q.Int(3), q.Text(4)); }));
  cutter.Finish();
  return Status::Ok();
}

}  // namespace

Expected<StepSeries> ComputeStepSeries(Store& store) {
  StepSeries series;
  std::vector<StepSpan> spans;
  PORTKIT_RETURN_IF_ERROR(sql::ForEachRow(store.db(), kMeasuredSteps, [&](sql::Statement& q) {
    spans.push_back({q.Int(0), q.Int(1), q.Int(2), spans.size(), q.IsNull(3) ? 0 : q.Int(3)});
  }));
  if (spans.empty()) {
    // No step marked: the whole profile is one step, as ComputeTotals' step time.
    PORTKIT_RETURN_IF_ERROR(FirstRow(store, "SELECT MIN(ts), MAX(ts + dur) FROM events", [&](const sql::Statement& q) {
      if (!q.IsNull(0)) spans.push_back({0, q.Int(0), q.Int(1), 0});
    }));
    if (spans.empty()) return series;
    series.step_ns.push_back(static_cast<double>(spans[0].end - spans[0].begin));
    // Every trace's events fall in the one span: read them all as trace 0.
    PORTKIT_RETURN_IF_ERROR(AddPerStep(store,
                                       "SELECT 0, e.ts, s.value || CASE WHEN e.input_dims IS NULL THEN '' ELSE ' ' || "
                                       "e.input_dims END, e.dur FROM events e JOIN strings s ON s.id = e.name "
                                       "WHERE e.kind = 'cpu_op'",
                                       spans, &series.ops));
    PORTKIT_RETURN_IF_ERROR(AddPerStep(store,
                                       "SELECT 0, k.ts, s.value, k.dur FROM events k JOIN strings s ON s.id = k.name "
                                       "WHERE k.kind IN ('kernel', 'gpu_memcpy', 'gpu_memset')",
                                       spans, &series.kernels));
    return series;
  }
  for (const auto& s : spans) series.step_ns.push_back(static_cast<double>(s.end - s.begin));
  PORTKIT_RETURN_IF_ERROR(AddPositions(store, spans, &series.positions));
  PORTKIT_RETURN_IF_ERROR(AddPerStep(store,
                                     "SELECT e.trace, e.ts, s.value || CASE WHEN e.input_dims IS NULL THEN '' ELSE ' ' "
                                     "|| e.input_dims END, e.dur FROM events e JOIN strings s ON s.id = e.name "
                                     "WHERE e.kind = 'cpu_op'",
                                     spans, &series.ops));
  // A device task runs after its launch, maybe past the step's end: it belongs to its launch's step.
  PORTKIT_RETURN_IF_ERROR(AddPerStep(store,
                                     "SELECT k.trace, COALESCE(r.ts, k.ts), s.value, k.dur FROM events k "
                                     "JOIN strings s ON s.id = k.name LEFT JOIN events r ON r.rowid = k.launch "
                                     "WHERE k.kind IN ('kernel', 'gpu_memcpy', 'gpu_memset')",
                                     spans, &series.kernels));
  return series;
}

Expected<Totals> ComputeTotals(Store& store) {
  Totals t;
  // Step time: each distinct step (a step can be a cpu_op and a user_annotation) over all traces.
  // ProfilerStep#0 of a trace with later steps is the warm-up (collect's step 0): apart.
  const std::string spans =
      "(SELECT e.trace AS trace, s.value AS name, MAX(e.ts + e.dur) - MIN(e.ts) AS span FROM events e "
      "JOIN strings s ON s.id = e.name WHERE e.kind = 'step' GROUP BY e.trace, s.value)";
  const std::string warmup =
      "name = 'ProfilerStep#0' AND trace IN (SELECT e.trace FROM events e JOIN strings s ON s.id = e.name "
      "WHERE e.kind = 'step' AND s.value <> 'ProfilerStep#0')";
  PORTKIT_RETURN_IF_ERROR(FirstRow(store, "SELECT COUNT(*), AVG(span) FROM " + spans + " WHERE NOT (" + warmup + ")",
                                   [&](const sql::Statement& q) {
                                     t.steps = static_cast<size_t>(q.Int(0));
                                     t.step_ms = q.Double(1) / 1e6;
                                   }));
  PORTKIT_RETURN_IF_ERROR(FirstRow(store, "SELECT COUNT(*), COALESCE(SUM(span), 0) FROM " + spans + " WHERE " + warmup,
                                   [&](const sql::Statement& q) {
                                     t.warmup_steps = static_cast<size_t>(q.Int(0));
                                     t.warmup_ms = q.Double(1) / 1e6;
                                   }));
  if (t.steps == 0)
    PORTKIT_RETURN_IF_ERROR(FirstRow(store, "SELECT MAX(ts + dur) - MIN(ts) FROM events", [&](const sql::Statement& q) {
      t.step_ms = static_cast<double>(q.Int(0)) / 1e6;
    }));
  PORTKIT_RETURN_IF_ERROR(
      Collect(store,
              "SELECT s.value || CASE WHEN e.input_dims IS NULL THEN '' ELSE ' ' || e.input_dims END, SUM(e.dur) "
              "FROM events e JOIN strings s ON s.id = e.name WHERE e.kind = 'cpu_op' GROUP BY 1",
              &t.ops));
  PORTKIT_RETURN_IF_ERROR(Collect(store,
                                  "SELECT s.value, SUM(e.dur) FROM events e JOIN strings s ON s.id = e.name "
                                  "WHERE e.kind IN ('kernel', 'gpu_memcpy', 'gpu_memset') GROUP BY 1",
                                  &t.kernels));
  return t;
}

std::vector<DeltaRow> Deltas(const std::vector<std::pair<std::string, int64_t>>& base,
                             const std::vector<std::pair<std::string, int64_t>>& cmp) {
  std::map<std::string, DeltaRow> rows;
  for (const auto& [k, v] : base) rows[k].base_ns += v;
  for (const auto& [k, v] : cmp) rows[k].cmp_ns += v;
  std::vector<DeltaRow> out;
  for (auto& [k, r] : rows) {
    r.key = k;
    out.push_back(r);
  }
  SortByDelta(&out);
  return out;
}

void SortByDelta(std::vector<DeltaRow>* rows) {
  std::sort(rows->begin(), rows->end(), [](const DeltaRow& a, const DeltaRow& b) {
    int64_t da = std::llabs(a.cmp_ns - a.base_ns), db = std::llabs(b.cmp_ns - b.base_ns);
    return da != db ? da > db : a.key < b.key;
  });
}

std::vector<double> FlatSteps(const SideSeries& side) {
  std::vector<double> out;
  for (const auto& run : side) out.insert(out.end(), run.step_ns.begin(), run.step_ns.end());
  return out;
}

PositionTable FlatPositions(const SideSeries& side) {
  std::map<std::string, std::vector<double>> rows;
  size_t at = 0, total = 0;
  for (const auto& run : side) total += run.step_ns.size();
  for (const auto& run : side) {
    for (const auto& [key, values] : run.positions) {
      auto& row = rows[key];
      if (row.empty()) row.assign(total, 0.0);
      std::copy(values.begin(), values.end(), row.begin() + static_cast<std::ptrdiff_t>(at));
    }
    at += run.step_ns.size();
  }
  PositionTable out;
  out.reserve(rows.size());
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  return out;
}

RunSizes StepCounts(const SideSeries& side) {
  RunSizes out;
  for (const auto& run : side) out.push_back(run.step_ns.size());
  return out;
}

namespace {

/// The per-step values of `key` over all runs of `side` (0 in the steps of a run without it).
std::vector<double> FlatKey(const SideSeries& side, bool kernels, const std::string& key) {
  std::vector<double> out;
  for (const auto& run : side) {
    const auto& table = kernels ? run.kernels : run.ops;
    auto it = table.find(key);
    if (it == table.end()) out.insert(out.end(), run.step_ns.size(), 0.0);
    else out.insert(out.end(), it->second.begin(), it->second.end());
  }
  return out;
}

}  // namespace

void AddStepIntervals(std::vector<DeltaRow>* rows, bool kernels, const SideSeries& base, const Resamples& base_draws,
                      const SideSeries& compare, const Resamples& compare_draws, double confidence) {
  for (auto& row : *rows) {
    auto b = FlatKey(base, kernels, row.key), c = FlatKey(compare, kernels, row.key);
    row.base_step_ns = Median(b);
    row.cmp_step_ns = Median(c);
    row.change = MedianChangeInterval(b, base_draws, c, compare_draws, confidence);
  }
}

}  // namespace portkit::prof
