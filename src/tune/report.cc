#include "tune/report.h"

#include <cstdio>

namespace portkit::tune {

ModelTotals Totals(const SessionResult& r) {
  ModelTotals t;
  for (const auto& op : r.ops) {
    t.baseline_ms += static_cast<double>(op.op.count) * op.before_us / 1000.0;
    t.result_ms += static_cast<double>(op.op.count) * op.after_us / 1000.0;
  }
  return t;
}

std::string Percent(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", p);
  return buf;
}

}  // namespace portkit::tune
