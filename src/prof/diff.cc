#include "prof/diff.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace portkit::prof {
namespace {

Status Collect(Store& store, const char* sql, std::vector<std::pair<std::string, int64_t>>* out) {
  sqlite3_stmt* q = nullptr;
  if (sqlite3_prepare_v2(store.db(), sql, -1, &q, nullptr) != SQLITE_OK)
    return IoError(std::string("diff query failed: ") + sqlite3_errmsg(store.db()));
  while (sqlite3_step(q) == SQLITE_ROW) {
    const unsigned char* k = sqlite3_column_text(q, 0);
    out->emplace_back(k ? reinterpret_cast<const char*>(k) : "", sqlite3_column_int64(q, 1));
  }
  sqlite3_finalize(q);
  return Status::Ok();
}

}  // namespace

Expected<Totals> ComputeTotals(Store& store) {
  Totals t;
  sqlite3_stmt* q = nullptr;
  // Step time: each distinct step (a step can be a cpu_op and a user_annotation) over all traces.
  const char* steps_sql =
      "SELECT COUNT(*), AVG(span) FROM (SELECT MAX(e.ts + e.dur) - MIN(e.ts) AS span FROM events e "
      "JOIN strings s ON s.id = e.name WHERE e.kind = 'step' GROUP BY e.trace, s.value)";
  if (sqlite3_prepare_v2(store.db(), steps_sql, -1, &q, nullptr) != SQLITE_OK)
    return IoError(std::string("diff query failed: ") + sqlite3_errmsg(store.db()));
  if (sqlite3_step(q) == SQLITE_ROW) {
    t.steps = static_cast<size_t>(sqlite3_column_int64(q, 0));
    t.step_ms = sqlite3_column_double(q, 1) / 1e6;
  }
  sqlite3_finalize(q);
  if (t.steps == 0) {
    sqlite3_prepare_v2(store.db(), "SELECT MAX(ts + dur) - MIN(ts) FROM events", -1, &q, nullptr);
    if (sqlite3_step(q) == SQLITE_ROW) t.step_ms = static_cast<double>(sqlite3_column_int64(q, 0)) / 1e6;
    sqlite3_finalize(q);
  }
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
