#include <charconv>
#include <cmath>
#include <cstdio>

#include "accuracy/dtype.h"
#include "core/csv_writer.h"
#include "render/compare_render.h"

namespace portkit::render {
using accuracy::CompareReport;
using accuracy::CompareSide;

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

namespace {

const std::string kNa = "N/A";

/// The named metrics of a row, N/A for a row whose tensors were not compared.
template <typename Names>
void AppendMetricCells(const accuracy::CompareRow& r, const Names& names, std::vector<std::string>& cells) {
  for (const char* m : names) {
    auto it = r.metrics.find(m);
    cells.push_back(r.compared ? FormatNumber(it != r.metrics.end() ? it->second : 0.0) : kNa);
  }
}

/// max, min, mean and l2norm of the target side, then of the reference side (N/A without statistics).
void AppendStatisticsCells(const accuracy::CompareRow& r, std::vector<std::string>& cells) {
  for (const accuracy::CompareSide* s : {&r.target, &r.reference}) {
    if (s->stats) {
      for (double v : {s->stats->max, s->stats->min, s->stats->mean, s->stats->norm}) cells.push_back(FormatNumber(v));
    } else {
      cells.insert(cells.end(), 4, kNa);
    }
  }
}

}  // namespace

std::string Collect(const std::function<Status(const ReportSet::Sink&)>& render) {
  std::string out;
  // A string sink never fails.
  (void)render([&](std::string_view piece) {
    out.append(piece);
    return Status::Ok();
  });
  return out;
}

std::string CompareCsv(const CompareReport& report) {
  return Collect([&](const ReportSet::Sink& sink) { return CompareCsvTo(report, sink); });
}

Status CompareCsvTo(const CompareReport& report, const ReportSet::Sink& sink) {
  CsvWriter csv({"NPU Name",
                 "Bench Name",
                 "NPU Dtype",
                 "Bench Dtype",
                 "NPU Tensor Shape",
                 "Bench Tensor Shape",
                 "Cosine",
                 "EucDist",
                 "MaxAbsErr",
                 "MaxRelativeErr",
                 "One Thousandth Err Ratio",
                 "Five Thousandths Err Ratio",
                 "NPU max",
                 "NPU min",
                 "NPU mean",
                 "NPU l2norm",
                 "Bench max",
                 "Bench min",
                 "Bench mean",
                 "Bench l2norm",
                 "Accuracy Reached or Not",
                 "Err_message",
                 "NPU Forward Op"});
  csv.Reserve(kPieceBytes + 4096);
  static const char* const kMetricColumns[] = {
      "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio"};
  PORTKIT_RETURN_IF_ERROR(report.ForEachRow([&](const accuracy::CompareRow& r) {
    std::vector<std::string> cells;
    cells.reserve(22);
    const CompareSide* sides[] = {&r.target, &r.reference};
    for (const auto* s : sides) cells.push_back(s->name.empty() ? kNa : s->name);
    for (const auto* s : sides) cells.push_back(s->dtype ? *s->dtype : kNa);
    for (const auto* s : sides) cells.push_back(s->shape ? accuracy::ShapeText(*s->shape) : kNa);
    AppendMetricCells(r, kMetricColumns, cells);
    AppendStatisticsCells(r, cells);
    cells.emplace_back(accuracy::VerdictName(r.verdict));
    cells.push_back(r.message);
    cells.push_back(report.TargetForward(r));
    csv.AddRow(cells);
    return FlushPiece(csv, sink);
  }));
  return FlushPiece(csv, sink, true);
}

}  // namespace portkit::render
