#include "tune/prof_input.h"

#include <simdjson.h>

#include <algorithm>
#include <map>

#include "prof/api.h"

namespace portkit::tune {

namespace {

// The calls of one listed op with one set of input dims, in the order of their first call.
struct Group {
  int64_t first_ts;
  size_t order;
  std::string name, dims;
  int64_t count = 0;
};

// Every call of the listed ops in thread and time order (outer calls before the calls they
// enclose): aten::linear and aten::matmul call aten::addmm / aten::mm underneath, and an op
// nested in another listed op on the same thread is the same work, skipped here. Groups come back
// in the order of their first call.
Expected<std::vector<Group>> GroupCalls(prof::ProfileQuery& profile) {
  std::map<std::pair<std::string, std::string>, Group> groups;
  prof::EventFilter filter;
  filter.kinds = {prof::EventKindName(prof::EventKind::kCpuOp)};
  filter.names = {"aten::mm", "aten::addmm", "aten::conv2d", "aten::linear", "aten::matmul"};
  std::string cur_trace;
  int64_t cur[2] = {0, 0};
  bool first = true;
  int64_t open_end = 0;  // end of the outermost listed call still open on this thread
  bool open = false;
  Status read = profile.ForEachEvent(filter, [&](const prof::EventRow& e) {
    int64_t ts = e.ts_ns, end = ts + e.dur_ns;
    if (first || e.trace != cur_trace || e.pid != cur[0] || e.tid != cur[1]) {
      cur_trace.assign(e.trace);
      cur[0] = e.pid, cur[1] = e.tid;
      open = false;
      first = false;
    }
    if (open && ts < open_end && end <= open_end) return Status::Ok();  // inside an outer listed call
    if (!e.has_input_dims) return Status::Ok();                         // no shapes: does not hide its callees
    open = true;
    open_end = end;
    std::string name(e.name);
    std::string dims(e.input_dims);
    auto [it, added] = groups.try_emplace({name, dims}, Group{ts, groups.size(), name, dims});
    if (!added) it->second.first_ts = std::min(it->second.first_ts, ts);
    ++it->second.count;
    return Status::Ok();
  });
  if (!read.ok()) return read;
  std::vector<Group> ordered;
  for (auto& [k, g] : groups) ordered.push_back(std::move(g));
  std::sort(ordered.begin(), ordered.end(), [](const Group& a, const Group& b) {
    return a.first_ts != b.first_ts ? a.first_ts < b.first_ts : a.order < b.order;
  });
  return ordered;
}

// The input dims of a profile row (`[[2, 3], [3, 4], []]`); false when they are not a JSON array.
bool ParseDims(simdjson::dom::parser& parser, const std::string& dims, std::vector<std::vector<int64_t>>* shapes) {
  simdjson::dom::array arr;
  if (parser.parse(simdjson::padded_string(dims)).get_array().get(arr)) return false;
  for (auto shape : arr) {
    std::vector<int64_t> s;
    simdjson::dom::array sa;
    if (!shape.get_array().get(sa))
      for (auto d : sa) {
        int64_t v;
        if (!d.get_int64().get(v)) s.push_back(v);
      }
    shapes->push_back(s);
  }
  return true;
}

// The MatMul operands of a call of `name` with these input shapes (op->inputs, op->bias); false
// when the shapes are not those of the op.
bool MatMulOperands(const std::string& name, const std::vector<std::vector<int64_t>>& shapes, OpDesc* op) {
  auto shape = [&](size_t i) { return i < shapes.size() ? shapes[i] : std::vector<int64_t>{}; };
  if (name == "aten::addmm" && shape(1).size() == 2 && shape(2).size() == 2) {
    op->inputs = {shape(1), shape(2)};
    op->bias = true;
    return true;
  }
  if ((name == "aten::mm" || name == "aten::matmul") && shape(0).size() == 2 && shape(1).size() == 2) {
    op->inputs = {shape(0), shape(1)};
    return true;
  }
  if (name != "aten::linear" || shape(0).size() < 2 || shape(1).size() != 2) return false;
  // linear(x[..., K], weight[N, K], bias[N]?): A[M, K] with M the product of the leading dims.
  int64_t m = 1;
  for (size_t i = 0; i + 1 < shape(0).size(); ++i) {
    int64_t d = shape(0)[i];
    if (d <= 0 || m > (int64_t{1} << 40) / d) return false;
    m *= d;
  }
  op->inputs = {{m, shape(0).back()}, {shape(1)[1], shape(1)[0]}};
  op->bias = shape(2).size() == 1;
  return true;
}

// One group as an operator to tune, or as an untuned one with the reason.
void AddGroup(const Group& g, int index, simdjson::dom::parser& parser, OpList* list) {
  const std::string& name = g.name;
  const std::string& dims = g.dims;
  OpDesc op;
  op.count = g.count;
  op.name = name.substr(6) + "_" + std::to_string(index);
  std::vector<std::vector<int64_t>> shapes;
  if (!ParseDims(parser, dims, &shapes)) {
    op.type = name;
    list->untuned.push_back({op, "unreadable input shapes " + dims});
    return;
  }
  if (name == "aten::conv2d") {
    op.type = "Conv2D";
    op.inputs = {shapes.size() > 0 ? shapes[0] : std::vector<int64_t>{},
                 shapes.size() > 1 ? shapes[1] : std::vector<int64_t>{}};
    list->untuned.push_back({op,
                             "profiles do not record the stride and padding of aten::conv2d; export the op list "
                             "with python -m portkit.export_ops instead"});
    return;
  }
  op.type = "MatMul";
  op.layout = "ND";
  if (!MatMulOperands(name, shapes, &op)) {
    list->untuned.push_back({op, "unexpected input shapes " + dims});
    return;
  }
  // The same checks and size limits as an op list entry.
  std::string reason;
  auto checked = ValidateOp(op, name, &reason);
  if (!checked.ok()) {
    list->untuned.push_back({op, checked.status().message() + " (input dims " + dims + ")"});
    return;
  }
  if (!reason.empty()) list->untuned.push_back({std::move(*checked), reason});
  else list->ops.push_back(std::move(*checked));
}

}  // namespace

Expected<OpList> OpsFromProfile(const std::filesystem::path& folder) {
  std::filesystem::path db_path = folder / prof::kStoreFileName;
  std::error_code ec;
  if (!std::filesystem::exists(db_path, ec))
    return NotFound(folder.string() + ": no portkit.db; run `portkit prof import -dir " + folder.string() +
                    "` first (the profile must be collected with --record-shapes)");
  // Read-only, and a store of another schema version is refused with what to do. Rows out of the
  // importers' range are hidden from the events read below; how many is said, never dropped silently.
  prof::QueryOptions options;
  options.dir = folder;
  auto profile = prof::OpenProfile(options);
  if (!profile.ok()) return profile.status();
  std::string left_out = profile->left_out().Warning(db_path.string());
  auto groups = GroupCalls(*profile);
  if (!groups.ok()) return groups.status();
  OpList list;
  list.name = folder.filename().string();
  if (!left_out.empty()) list.left_out.push_back(std::move(left_out));
  simdjson::dom::parser parser;
  int index = 0;
  for (const Group& g : *groups) AddGroup(g, index++, parser, &list);
  return list;
}

}  // namespace portkit::tune
