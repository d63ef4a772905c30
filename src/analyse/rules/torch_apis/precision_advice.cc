// Rule: precision_advice
// What it finds: calls of APIs with known precision hazards on the target
//   (data/targets/<target>/advice.json "precision"), e.g. torch.baddbmm, torch.matmul.
// Why it matters: results may overflow or be non-deterministic on the target.
// Example: `torch.baddbmm(b, q, k)` → "may exist process overflow, try torch.bmm() + add".
// Use instead: the tip's alternative.
#include "analyse/rules/torch_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

class PrecisionAdviceRule : public Rule {
 public:
  std::string_view name() const override { return "precision_advice"; }

  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    for (const auto& q : ev.lookup) {
      for (const auto& [api, tip] : ctx.target.advice().precision) {
        if (api == q) {
          ctx.Report(ev.node, api, tip, Category::kPrecision, Confidence::kHigh, name());
          return;
        }
      }
    }
  }
};

}  // namespace

std::unique_ptr<Rule> MakePrecisionAdviceRule() { return std::make_unique<PrecisionAdviceRule>(); }

}  // namespace portkit::analyse
