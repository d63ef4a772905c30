#pragma once
/// A finding of the analyser: data for the reports, never an error.
#include <cstdint>
#include <string>

namespace portkit::analyse {

enum class Category : uint8_t {
  kUnsupported,  ///< unsupported_api.csv
  kUnknown,      ///< unknown_api.csv
  kCuda,         ///< cuda_op_list.csv (CUDA-specific code and custom CUDA ops)
  kPrecision,    ///< api_precision_advice.csv
  kPerformance,  ///< api_performance_advice.csv
  kAffinity,     ///< affinity_api_call.csv
};

const char* CategoryName(Category c);

/// Every category, in the order above.
inline constexpr Category kAllCategories[] = {Category::kUnsupported, Category::kUnknown,     Category::kCuda,
                                              Category::kPrecision,   Category::kPerformance, Category::kAffinity};

enum class Confidence : uint8_t { kHigh, kMedium, kLow };
const char* ConfidenceName(Confidence c);

struct Finding {
  std::string file;  ///< display path ("project/train.py"), or "NA" for global advice
  uint32_t start_line = 0, end_line = 0, start_col = 0, end_col = 0;  ///< 0 = NA
  std::string op;                                                     ///< qualified name or what was found
  std::string tip;
  Category category = Category::kUnsupported;
  Confidence confidence = Confidence::kHigh;
  std::string rule;      ///< the rule that reported it
  std::string function;  ///< qualified name of the enclosing function, empty at module level
  std::string api_type;  ///< affinity findings: class, function, torch or special
};

bool operator<(const Finding& a, const Finding& b);

}  // namespace portkit::analyse
