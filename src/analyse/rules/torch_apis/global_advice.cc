// Rule: global_advice
// What it finds: project-wide configuration advice (data/targets/<target>/advice.json "global",
//   "suggest_use"): compile mode, task queue and HCCL environment settings, and no_sync() when
//   DistributedDataParallel is used without it. Reported once with File/lines `NA`, and skipped when
//   the code already calls the API or names the environment variable.
// Why it matters: these settings are cheap and often worth double-digit percentages.
// Example: a training script that never calls the set_compile_mode API named in npu's advice.json.
// Use instead: the setting named in the tip.
#include <algorithm>

#include "analyse/rules/torch_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

class GlobalAdviceRule : public ProjectRule {
 public:
  std::string_view name() const override { return "global_advice"; }

  void Finish(const std::vector<Finding>&, const std::vector<std::string>& seen, const Target& target,
              std::vector<Finding>& out) override {
    auto has = [&](const std::string& s) { return std::binary_search(seen.begin(), seen.end(), s); };
    for (const auto& s : target.advice().suggest_use) {
      bool used = std::any_of(s.when_used.begin(), s.when_used.end(), has);
      if (used && !has("." + s.api)) out.push_back(Global(s.api, s.tip));
    }
    for (const auto& g : target.advice().global) {
      if (!has(g.key)) out.push_back(Global(g.key, g.tip));
    }
  }

 private:
  Finding Global(const std::string& op, const std::string& tip) const {
    Finding f;
    f.file = "NA";
    f.op = op;
    f.tip = tip;
    f.category = Category::kPerformance;
    f.confidence = Confidence::kMedium;
    f.rule = std::string(name());
    return f;
  }
};

}  // namespace

std::unique_ptr<ProjectRule> MakeGlobalAdviceRule() { return std::make_unique<GlobalAdviceRule>(); }

}  // namespace portkit::analyse
