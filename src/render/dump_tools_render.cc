#include "render/dump_tools_render.h"

#include "core/json_writer.h"
#include "core/table.h"

namespace portkit::render {
namespace {

void Strings(JsonWriter& j, const char* key, const std::vector<std::string>& values) {
  j.Key(key).BeginArray();
  for (const auto& v : values) j.String(v);
  j.EndArray();
}

std::string_view CodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kParse: return "parse";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kInternal: return "internal";
  }
  return "internal";
}

}  // namespace

std::string OverflowText(const accuracy::OverflowReport& report) {
  if (report.overflowing.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const auto& op : report.overflowing) {
    bool origin = report.origin && report.origin->index == op.index;
    std::string mark = rows.empty() ? (origin ? "first, origin" : "first") : (origin ? "origin" : "");
    rows.push_back({mark, std::to_string(op.index), op.name, op.phase, op.module, op.stack});
  }
  std::string text = RenderTable({"", "index", "operator", "phase", "module", "stack"}, rows);
  if (report.origin)
    text += "Origin of the first inf/nan: " + report.origin->name + " #" + std::to_string(report.origin->index) + " (" +
            report.origin->phase + (report.origin->stack.empty() ? "" : ", " + report.origin->stack) +
            "): " + report.origin->reason + "\n";
  else
    text +=
        "Origin of the first inf/nan: none found (only fill/creation operators, or inputs already inf/nan, or no "
        "inf/nan at all)\n";
  return text;
}

std::string OverflowJson(const accuracy::OverflowReport& report) {
  JsonWriter j;
  j.BeginObject();
  j.Key("dump").String(report.dump).Key("operators").Int(static_cast<int64_t>(report.operators));
  auto op_json = [&](const accuracy::OverflowOp& op) {
    j.BeginObject().Key("index").Int(op.index).Key("name").String(op.name).Key("phase").String(op.phase);
    j.Key("module").String(op.module).Key("stack").String(op.stack).Key("reason").String(op.reason);
    j.Key("deliberate").Bool(op.deliberate).EndObject();
  };
  j.Key("first");
  if (report.overflowing.empty()) j.Null();
  else op_json(report.overflowing.front());
  j.Key("origin");
  if (!report.origin) j.Null();
  else op_json(*report.origin);
  j.Key("origin_basis").String(report.origin_basis);
  j.Key("overflowing").BeginArray();
  for (const auto& op : report.overflowing) op_json(op);
  j.EndArray();
  Strings(j, "warnings", report.warnings);
  j.EndObject();
  return j.str();
}

std::string ConvertJson(const accuracy::ConvertReport& report) {
  JsonWriter j;
  j.BeginObject();
  j.Key("input").String(report.input).Key("output").String(report.output);
  j.Key("type").String(accuracy::ConvertTypeName(report.type));
  j.Key("written").BeginArray();
  for (const auto& w : report.written)
    j.BeginObject()
        .Key("file")
        .String(w.file)
        .Key("source")
        .String(w.source)
        .Key("widened")
        .Bool(w.widened)
        .EndObject();
  j.EndArray();
  Strings(j, "index_files", report.index_files);
  j.Key("widened").Int(static_cast<int64_t>(report.widened));
  Strings(j, "skipped", report.skipped);
  j.Key("failed").BeginArray();
  for (const auto& f : report.failed)
    j.BeginObject().Key("message").String(f.message).Key("code").String(CodeName(f.code)).EndObject();
  j.EndArray();
  j.Key("input_files").Int(static_cast<int64_t>(report.input_files));
  j.Key("input_files_failed").Int(static_cast<int64_t>(report.input_files_failed));
  j.EndObject();
  return j.str();
}

std::string ExtractJson(const accuracy::ExtractReport& report) {
  JsonWriter j;
  j.BeginObject();
  j.Key("input").String(report.input).Key("output").String(report.output);
  j.Key("format").String(report.hdf5 ? "hdf5" : "dump");
  j.Key("appended").Bool(report.appended);
  Strings(j, "extracted", report.extracted);
  Strings(j, "missing", report.missing);
  Strings(j, "covered", report.covered);
  Strings(j, "files", report.files);
  Strings(j, "warnings", report.warnings);
  j.EndObject();
  return j.str();
}

}  // namespace portkit::render
