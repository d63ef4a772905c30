#include "render/prof_query.h"

namespace portkit::render {
namespace {

using T = QueryColumn::Type;

std::string Int(int64_t v) { return std::to_string(v); }

}  // namespace

const std::vector<std::string>& ProfQueryTables() {
  static const std::vector<std::string> kTables = {"events", "ops", "steps", "comm"};
  return kTables;
}

const std::vector<QueryColumn>& ProfQueryColumns(std::string_view table) {
  static const std::vector<QueryColumn> kEvents = {
      {"trace", T::kText},      {"kind", T::kText},       {"name", T::kText},       {"category", T::kText},
      {"pid", T::kInt},         {"tid", T::kInt},         {"ts_ns", T::kInt},       {"dur_ns", T::kInt},
      {"correlation", T::kInt}, {"external_id", T::kInt}, {"input_dims", T::kText}, {"input_types", T::kText}};
  static const std::vector<QueryColumn> kOps = {
      {"name", T::kText}, {"input_dims", T::kText}, {"count", T::kInt}, {"self_ns", T::kInt}, {"total_ns", T::kInt}};
  static const std::vector<QueryColumn> kSteps = {{"trace", T::kText},   {"name", T::kText},  {"number", T::kInt},
                                                  {"start_ns", T::kInt}, {"end_ns", T::kInt}, {"dur_ns", T::kInt},
                                                  {"warmup", T::kBool}};
  static const std::vector<QueryColumn> kComm = {
      {"trace", T::kText}, {"name", T::kText},     {"device", T::kInt},      {"stream", T::kInt},
      {"ts_ns", T::kInt},  {"dur_ns", T::kInt},    {"collective", T::kText}, {"group", T::kText},
      {"dtype", T::kText}, {"in_nelems", T::kInt}, {"out_nelems", T::kInt},  {"group_size", T::kInt}};
  static const std::vector<QueryColumn> kNone;
  if (table == "events") return kEvents;
  if (table == "ops") return kOps;
  if (table == "steps") return kSteps;
  if (table == "comm") return kComm;
  return kNone;
}

std::vector<std::string> ProfQueryCells(const prof::EventRow& r) {
  return {std::string(r.trace),
          std::string(r.kind),
          std::string(r.name),
          std::string(r.category),
          Int(r.pid),
          Int(r.tid),
          Int(r.ts_ns),
          Int(r.dur_ns),
          Int(r.correlation),
          Int(r.external_id),
          std::string(r.input_dims),
          std::string(r.input_types)};
}

std::vector<std::string> ProfQueryCells(const prof::OpRow& r) {
  return {r.name, r.input_dims, Int(r.count), Int(r.self_ns), Int(r.total_ns)};
}

std::vector<std::string> ProfQueryCells(const prof::StepRow& r) {
  return {r.trace,
          r.name,
          Int(r.number),
          Int(r.start_ns),
          Int(r.end_ns),
          Int(r.end_ns - r.start_ns),
          r.warmup ? "true" : "false"};
}

std::vector<std::string> ProfQueryCells(const prof::CommRow& r) {
  return {r.trace,      r.name,  Int(r.device), Int(r.stream),    Int(r.ts_ns),      Int(r.dur_ns),
          r.collective, r.group, r.dtype,       Int(r.in_nelems), Int(r.out_nelems), Int(r.group_size)};
}

std::vector<std::string> ProfQueryWriter::Header(const std::vector<QueryColumn>& columns) {
  std::vector<std::string> out;
  for (const auto& c : columns) out.emplace_back(c.name);
  return out;
}

ProfQueryWriter::ProfQueryWriter(bool json, const std::vector<QueryColumn>& columns)
    : json_(json), columns_(columns), csv_(Header(columns)) {
  if (json_) j_.BeginArray();
}

void ProfQueryWriter::AddRow(const std::vector<std::string>& cells) {
  if (!json_) {
    csv_.AddRow(cells);
    return;
  }
  j_.BeginObject();
  for (size_t i = 0; i < columns_.size() && i < cells.size(); ++i) {
    j_.Key(columns_[i].name);
    switch (columns_[i].type) {
      case T::kInt: j_.Int(std::stoll(cells[i])); break;
      case T::kBool: j_.Bool(cells[i] == "true"); break;
      case T::kText: j_.String(cells[i]); break;
    }
  }
  j_.EndObject();
}

std::string ProfQueryWriter::Finish() {
  if (!json_) return csv_.Take();
  j_.EndArray();
  return j_.Take();
}

}  // namespace portkit::render
