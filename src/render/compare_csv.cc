#include <charconv>
#include <cmath>
#include <cstdio>

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

std::string Shape(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

const std::string kNa = "N/A";

}  // namespace

std::string CompareCsv(const CompareReport& report) {
  CsvWriter csv({"NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
                 "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                 "Five Thousandths Err Ratio", "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max",
                 "Bench min", "Bench mean", "Bench l2norm", "Accuracy Reached or Not", "Err_message"});
  static const char* const kMetricColumns[] = {"Cosine",         "EucDist",
                                               "MaxAbsErr",      "MaxRelativeErr",
                                               "One Thousandth Err Ratio", "Five Thousandths Err Ratio"};
  for (const auto& r : report.rows) {
    std::vector<std::string> cells;
    cells.reserve(22);
    const CompareSide* sides[] = {&r.target, &r.reference};
    for (const auto* s : sides) cells.push_back(s->name.empty() ? kNa : s->name);
    for (const auto* s : sides) cells.push_back(s->dtype ? *s->dtype : kNa);
    for (const auto* s : sides) cells.push_back(s->shape ? Shape(*s->shape) : kNa);
    for (const char* m : kMetricColumns) {
      auto it = r.metrics.find(m);
      cells.push_back(r.compared ? FormatNumber(it != r.metrics.end() ? it->second : 0.0) : kNa);
    }
    for (const auto* s : sides) {
      if (s->stats) {
        for (double v : {s->stats->max, s->stats->min, s->stats->mean, s->stats->norm}) cells.push_back(FormatNumber(v));
      } else {
        cells.insert(cells.end(), 4, kNa);
      }
    }
    cells.emplace_back(accuracy::VerdictName(r.verdict));
    cells.push_back(r.message);
    csv.AddRow(cells);
  }
  return csv.str();
}

}  // namespace portkit::render
