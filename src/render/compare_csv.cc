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
  CsvWriter csv({"NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
                 "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                 "Five Thousandths Err Ratio", "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max",
                 "Bench min", "Bench mean", "Bench l2norm", "Accuracy Reached or Not", "Err_message"});
  csv.Reserve(kPieceBytes + 4096);
  static const char* const kMetricColumns[] = {"Cosine",         "EucDist",
                                               "MaxAbsErr",      "MaxRelativeErr",
                                               "One Thousandth Err Ratio", "Five Thousandths Err Ratio"};
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
    csv.AddRow(cells);
    return FlushPiece(csv, sink);
  }));
  return FlushPiece(csv, sink, true);
}

namespace {

/// The tensor part of a row name (`input.0`, `output.1`, `replay.output.0`) after `op.phase.index.`.
std::string KeyOf(const std::string& name) {
  for (const char* part : {".replay.", ".input", ".output"}) {
    size_t at = name.find(part);
    if (at != std::string::npos) return name.substr(at + 1);
  }
  return name.substr(name.rfind('.') + 1);  // `*`: a whole operator
}

std::string MsprobeName(const CompareSide& side, long op, const std::vector<std::string>& calls) {
  if (side.name.empty()) return kNa;
  if (op < 0 || static_cast<size_t>(op) >= calls.size()) return side.name;
  return calls[static_cast<size_t>(op)] + "." + KeyOf(side.name);
}

std::string Grad(int8_t g) { return g < 0 ? kNa : g ? "True" : "False"; }

}  // namespace

std::string CompareMsprobeCsv(const CompareReport& report) {
  return Collect([&](const ReportSet::Sink& sink) { return CompareMsprobeCsvTo(report, sink); });
}

Status CompareMsprobeCsvTo(const CompareReport& report, const ReportSet::Sink& sink) {
  // msprobe 26's columns (msprobe/core/common/const.py): real-data mode, or summary mode when no
  // row was compared from tensor data but some from statistics.
  bool any_data = false, any_stats = false;
  PORTKIT_RETURN_IF_ERROR(report.ForEachRow([&](const accuracy::CompareRow& r) {
    any_data = any_data || r.compared, any_stats = any_stats || r.from_statistics;
    return Status::Ok();
  }));
  const bool summary = !any_data && any_stats;
  std::vector<std::string> header = {"NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
                                     "Bench Tensor Shape", "NPU Requires_grad", "Bench Requires_grad"};
  static const char* const kData[] = {"Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                                      "Five Thousandths Err Ratio"};
  static const char* const kSummary[] = {"Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr",
                                         "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"};
  if (summary) header.insert(header.end(), std::begin(kSummary), std::end(kSummary));
  else header.insert(header.end(), std::begin(kData), std::end(kData));
  for (const char* c : {"NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean",
                        "Bench l2norm", "Requires_grad Consistent", "Result", "Err_message", "NPU_Stack_Info"})
    header.emplace_back(c);
  if (!summary) header.emplace_back("Data_name");
  CsvWriter csv(header);
  csv.Reserve(kPieceBytes + 4096);
  PORTKIT_RETURN_IF_ERROR(report.ForEachRow([&](const accuracy::CompareRow& r) {
    std::vector<std::string> cells;
    cells.reserve(header.size());
    cells.push_back(MsprobeName(r.target, r.target_op, report.target_calls));
    cells.push_back(MsprobeName(r.reference, r.reference_op, report.reference_calls));
    const CompareSide* sides[] = {&r.target, &r.reference};
    for (const auto* s : sides) cells.push_back(s->dtype ? *s->dtype : kNa);
    for (const auto* s : sides) cells.push_back(s->shape ? accuracy::ShapeText(*s->shape) : kNa);
    for (const auto* s : sides) cells.push_back(Grad(s->requires_grad));
    if (summary) {
      // Differences target − reference of each statistic, then their relative sizes.
      bool both = r.target.stats && r.reference.stats;
      double t[4], b[4];
      if (both) {
        const auto &ts = *r.target.stats, &bs = *r.reference.stats;
        t[0] = ts.max, t[1] = ts.min, t[2] = ts.mean, t[3] = ts.norm;
        b[0] = bs.max, b[1] = bs.min, b[2] = bs.mean, b[3] = bs.norm;
      }
      for (int i = 0; i < 4; ++i) cells.push_back(both ? FormatNumber(t[i] - b[i]) : kNa);
      for (int i = 0; i < 4; ++i)
        cells.push_back(both ? FormatNumber(b[i] == 0 ? (t[i] == 0 ? 0.0 : INFINITY) : std::fabs((t[i] - b[i]) / b[i]))
                             : kNa);
    } else {
      AppendMetricCells(r, kData, cells);
    }
    AppendStatisticsCells(r, cells);
    cells.emplace_back(r.target.requires_grad == r.reference.requires_grad ? "True" : "False");
    // msprobe's Result: pass / warning / error; here Yes → pass, No → error, Unmatched → warning.
    cells.emplace_back(r.verdict == accuracy::Verdict::kYes  ? "pass"
                       : r.verdict == accuracy::Verdict::kNo ? "error"
                       : r.verdict == accuracy::Verdict::kUnmatched ? "warning"
                                                                    : "");
    cells.push_back(r.message);
    cells.push_back(r.target_op >= 0 && static_cast<size_t>(r.target_op) < report.target_stacks.size()
                        ? report.target_stacks[static_cast<size_t>(r.target_op)]
                        : "");
    if (!summary) {
      if (r.target.data_name.empty() && r.reference.data_name.empty()) cells.emplace_back("-1");
      else cells.push_back("['" + (r.target.data_name.empty() ? "-1" : r.target.data_name) + "', '" +
                           (r.reference.data_name.empty() ? "-1" : r.reference.data_name) + "']");
    }
    csv.AddRow(cells);
    return FlushPiece(csv, sink);
  }));
  return FlushPiece(csv, sink, true);
}

}  // namespace portkit::render
