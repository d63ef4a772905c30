#include "prof/diff.h"

#include <algorithm>
#include <cstdlib>
#include <map>

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

}  // namespace

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
  PORTKIT_RETURN_IF_ERROR(Collect(
      store,
      "SELECT s.value || CASE WHEN e.input_dims IS NULL THEN '' ELSE ' ' || e.input_dims END, SUM(e.dur) "
      "FROM events e JOIN strings s ON s.id = e.name WHERE e.kind = 'cpu_op' GROUP BY 1",
      &t.ops));
  PORTKIT_RETURN_IF_ERROR(Collect(
      store,
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
  std::sort(out.begin(), out.end(), [](const DeltaRow& a, const DeltaRow& b) {
    int64_t da = std::llabs(a.cmp_ns - a.base_ns), db = std::llabs(b.cmp_ns - b.base_ns);
    return da != db ? da > db : a.key < b.key;
  });
  return out;
}

}  // namespace portkit::prof
