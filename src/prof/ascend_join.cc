#include "prof/ascend_join.h"

#include <filesystem>
#include <map>

#include "core/sqlite.h"

namespace portkit::prof {
namespace {

Expected<int64_t> TraceId(sql::Database& db, const std::string& path) {
  auto q = db.Prepare("SELECT id, events FROM traces WHERE path = ?");
  if (!q.ok()) return q.status();
  q->Bind(1, path);
  auto row = q->Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound("trace " + path + " is not in the store");
  return q->Int(0);
}

Expected<int64_t> Count(sql::Database& db, const std::string& sql) {
  auto q = db.Prepare(sql);
  if (!q.ok()) return q.status();
  auto row = q->Step();
  if (!row.ok()) return row.status();
  return *row ? q->Int(0) : 0;
}

Status JoinPair(sql::Database& db, AscendJoin& join) {
  auto tv = TraceId(db, join.trace_view);
  if (!tv.ok()) return tv.status();
  auto tk = TraceId(db, join.kernel_details);
  if (!tk.ok()) return tk.status();
  const std::string v = std::to_string(*tv), k = std::to_string(*tk);
  sql::Transaction tx(db);
  PORTKIT_RETURN_IF_ERROR(tx.status());
  PORTKIT_RETURN_IF_ERROR(
      db.Exec("CREATE TEMP TABLE IF NOT EXISTS ascend_pairs (v INTEGER PRIMARY KEY, k INTEGER UNIQUE); "
              "DELETE FROM ascend_pairs;"));
  // Each task takes the first row on its stream starting within 1 µs; a row joins one task only.
  // The store keeps no index on time (docs/prof.md, "Store"): the join builds one for itself and
  // drops it again in the same transaction.
  PORTKIT_RETURN_IF_ERROR(
      db.Exec("CREATE INDEX IF NOT EXISTS ascend_join_time ON events (trace, tid, ts) "
              "WHERE kind = 'kernel'"));
  PORTKIT_RETURN_IF_ERROR(
      db.Exec("INSERT OR IGNORE INTO ascend_pairs SELECT t.rowid, MIN(r.rowid) FROM events t JOIN events r "
              "ON r.trace = " +
              k +
              " AND r.kind = 'kernel' AND r.tid = t.tid AND r.ts BETWEEN t.ts - 1000 AND t.ts + 1000 "
              "WHERE t.trace = " +
              v + " AND t.kind = 'kernel' GROUP BY t.rowid ORDER BY t.rowid"));
  auto rows = Count(db, "SELECT COUNT(*) FROM events WHERE trace = " + k);
  if (!rows.ok()) return rows.status();
  auto joined = Count(db, "SELECT COUNT(*) FROM ascend_pairs");
  if (!joined.ok()) return joined.status();
  PORTKIT_RETURN_IF_ERROR(db.Exec(
      "UPDATE events SET "
      "grid_x = COALESCE(events.grid_x, r.grid_x), grid_y = COALESCE(events.grid_y, r.grid_y), "
      "grid_z = COALESCE(events.grid_z, r.grid_z), input_dims = COALESCE(events.input_dims, r.input_dims), "
      "input_types = COALESCE(events.input_types, r.input_types), "
      // The row's op type, core, formats and outputs (op_summary, op_statistic); the task's own
      // args win where both have a key.
      "args = CASE WHEN r.args IS NULL OR NOT json_valid(r.args) THEN events.args "
      "WHEN events.args IS NULL OR NOT json_valid(events.args) THEN r.args ELSE json_patch(r.args, events.args) END "
      "FROM ascend_pairs p JOIN events r ON r.rowid = p.k WHERE events.rowid = p.v"));
  PORTKIT_RETURN_IF_ERROR(db.Exec("DELETE FROM events WHERE rowid IN (SELECT k FROM ascend_pairs)"));
  // The rows with no task there (trace_view may hold fewer tasks) join its timeline and steps too.
  PORTKIT_RETURN_IF_ERROR(db.Exec("UPDATE events SET trace = " + v + " WHERE trace = " + k));
  if (*rows > 0) {
    auto q = db.Prepare(
        "UPDATE traces SET events = CASE WHEN id = ?1 THEN 0 ELSE events + ?2 END, "
        "warning = CASE WHEN id = ?1 THEN (CASE WHEN warning IS NULL THEN ?3 ELSE warning || '; ' || ?3 END) "
        "ELSE warning END WHERE id IN (?1, ?4)");
    if (!q.ok()) return q.status();
    std::string note = std::to_string(*joined) + " of " + std::to_string(*rows) + " rows joined to the tasks of " +
                       join.trace_view + ", the other " + std::to_string(*rows - *joined) + " added to its timeline";
    PORTKIT_RETURN_IF_ERROR(q->Bind(1, *tk).Bind(2, *rows - *joined).Bind(3, note).Bind(4, *tv).Run());
  }
  PORTKIT_RETURN_IF_ERROR(db.Exec("DELETE FROM ascend_pairs; DROP INDEX IF EXISTS ascend_join_time;"));
  join.rows = *rows;
  join.joined = *joined;
  return tx.Commit();
}

}  // namespace

Expected<std::vector<AscendJoin>> JoinAscendSiblings(Store& store,
                                                     const std::vector<std::pair<std::string, std::string>>& traces) {
  std::map<std::string, std::string> views, details;  // folder → trace path
  for (const auto& [path, importer] : traces) {
    std::string folder = std::filesystem::path(path).parent_path().generic_string();
    if (importer == "ascend_pt") views[folder] = path;
    else if (importer == "kernel_details") details[folder] = path;
  }
  std::vector<AscendJoin> out;
  for (const auto& [folder, detail] : details) {
    auto it = views.find(folder);
    if (it == views.end()) continue;
    AscendJoin join{it->second, detail};
    PORTKIT_RETURN_IF_ERROR(JoinPair(store.db(), join));
    out.push_back(join);
  }
  return out;
}

}  // namespace portkit::prof
