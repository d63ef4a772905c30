// Advisor rule: dynamic_shapes
// What it finds: operators called with many distinct input shapes (needs --record-shapes).
// Why it matters: accelerators that compile per shape (Ascend) recompile each time.
// Advice: pad or bucket to fixed shapes; `portkit analyse -m dynamic_shape` finds the call sites.
#include <algorithm>
#include <map>
#include <set>

#include "prof/advisor/rule_list.h"

namespace portkit::prof {
namespace {

class DynamicShapesRule : public AdvisorRule {
 public:
  std::string_view name() const override { return "dynamic_shapes"; }
  void Check(const Profile& p, std::vector<AdvisorFinding>& out) override {
    std::map<std::string, std::set<std::string>> shapes;
    for (const auto& e : p.events)
      if (e.kind == "cpu_op" && !e.input_dims.empty() && e.input_dims != "[]") shapes[e.name].insert(e.input_dims);
    std::vector<std::pair<size_t, std::string>> many;
    for (const auto& [op, set] : shapes)
      if (set.size() > 5) many.emplace_back(set.size(), op);
    if (many.empty()) return;
    std::sort(many.rbegin(), many.rend());
    std::string evidence;
    for (size_t i = 0; i < many.size() && i < 5; ++i)
      evidence += (i ? ", " : "") + many[i].second + " (" + std::to_string(many[i].first) + " shapes)";
    out.push_back({std::string(name()), Severity::kMedium,
                   std::to_string(many.size()) + " operators see more than 5 distinct input shapes", evidence,
                   "pad or bucket inputs to a few fixed shapes; run `portkit analyse -m dynamic_shape` to find "
                   "the call sites"});
  }
};

}  // namespace

std::unique_ptr<AdvisorRule> MakeDynamicShapesRule() { return std::make_unique<DynamicShapesRule>(); }

}  // namespace portkit::prof
