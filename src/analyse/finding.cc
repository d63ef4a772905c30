#include "analyse/finding.h"

#include <tuple>

namespace portkit::analyse {

const char* CategoryName(Category c) {
  switch (c) {
    case Category::kUnsupported: return "unsupported";
    case Category::kUnknown: return "unknown";
    case Category::kCuda: return "cuda";
    case Category::kPrecision: return "precision";
    case Category::kPerformance: return "performance";
    case Category::kAffinity: return "affinity";
  }
  return "?";
}

const char* ConfidenceName(Confidence c) {
  switch (c) {
    case Confidence::kHigh: return "high";
    case Confidence::kMedium: return "medium";
    case Confidence::kLow: return "low";
  }
  return "?";
}

bool operator<(const Finding& a, const Finding& b) {
  // Global findings (file "NA") sort after file findings.
  bool a_na = a.file == "NA", b_na = b.file == "NA";
  return std::tie(a_na, a.file, a.start_line, a.start_col, a.end_line, a.end_col, a.category, a.op, a.rule, a.tip) <
         std::tie(b_na, b.file, b.start_line, b.start_col, b.end_line, b.end_col, b.category, b.op, b.rule, b.tip);
}

}  // namespace portkit::analyse
