#include "tune/prof_input.h"

#include <simdjson.h>
#include <sqlite3.h>

#include <map>

namespace portkit::tune {

Expected<OpList> OpsFromProfile(const std::filesystem::path& folder) {
  std::filesystem::path db_path = folder / "portkit.db";
  std::error_code ec;
  if (!std::filesystem::exists(db_path, ec))
    return NotFound(folder.string() + ": no portkit.db; run `portkit prof import -dir " + folder.string() +
                    "` first (the profile must be collected with --record-shapes)");
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::string m = db_path.string() + ": cannot open: " + (db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return IoError(m);
  }
  sqlite3_stmt* st = nullptr;
  const char* sql =
      "SELECT s.value, e.input_dims, COUNT(*) FROM events e JOIN strings s ON s.id = e.name "
      "WHERE e.kind = 'cpu_op' AND s.value IN ('aten::mm', 'aten::addmm', 'aten::conv2d') "
      "AND e.input_dims IS NOT NULL GROUP BY s.value, e.input_dims ORDER BY MIN(e.ts)";
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) {
    std::string m = db_path.string() + ": not a portkit profile database: " + sqlite3_errmsg(db);
    sqlite3_close(db);
    return ParseError(m);
  }
  OpList list;
  list.name = folder.filename().string();
  simdjson::dom::parser parser;
  int index = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::string name = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    std::string dims = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
    int64_t count = sqlite3_column_int64(st, 2);
    std::vector<std::vector<int64_t>> shapes;
    simdjson::dom::array arr;
    if (parser.parse(simdjson::padded_string(dims)).get_array().get(arr)) continue;
    for (auto shape : arr) {
      std::vector<int64_t> s;
      simdjson::dom::array sa;
      if (!shape.get_array().get(sa))
        for (auto d : sa) {
          int64_t v;
          if (!d.get_int64().get(v)) s.push_back(v);
        }
      shapes.push_back(s);
    }
    OpDesc op;
    op.count = count;
    op.name = name.substr(6) + "_" + std::to_string(index++);
    if (name == "aten::conv2d") {
      op.type = "Conv2D";
      op.inputs = {shapes.size() > 0 ? shapes[0] : std::vector<int64_t>{}, shapes.size() > 1 ? shapes[1] : std::vector<int64_t>{}};
      list.untuned.push_back({op, "profiles do not record the stride and padding of aten::conv2d; export the op list "
                                  "with python -m portkit.export_ops instead"});
      continue;
    }
    op.type = "MatMul";
    op.layout = "ND";
    if (name == "aten::addmm" && shapes.size() >= 3 && shapes[1].size() == 2 && shapes[2].size() == 2) {
      op.inputs = {shapes[1], shapes[2]};
      op.bias = true;
    } else if (name == "aten::mm" && shapes.size() >= 2 && shapes[0].size() == 2 && shapes[1].size() == 2) {
      op.inputs = {shapes[0], shapes[1]};
    } else {
      list.untuned.push_back({op, "unexpected input shapes " + dims});
      continue;
    }
    if (op.inputs[0][1] != op.inputs[1][0]) {
      list.untuned.push_back({op, "inner dimensions differ in " + dims});
      continue;
    }
    list.ops.push_back(op);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return list;
}

}  // namespace portkit::tune
