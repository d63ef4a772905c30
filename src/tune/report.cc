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

RepoAccounting Accounting(const SessionResult& r) {
  RepoAccounting a;
  for (const auto& op : r.ops) {
    if (op.bank_hit) ++a.hit;
    switch (op.status) {
      case RepoStatus::kAdd: ++a.add; break;
      case RepoStatus::kHit: break;
      case RepoStatus::kUpdate: ++a.update; break;
      case RepoStatus::kReserved: ++a.reserved; break;
      case RepoStatus::kUnsatisfied: ++a.unsatisfied; break;
    }
  }
  a.untuned = static_cast<int>(r.untuned.size());
  return a;
}

std::string Percent(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", p);
  return buf;
}

}  // namespace portkit::tune
