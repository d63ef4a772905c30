// Rule: fused_optimizer (Api Type `torch`)
// What it finds: torch optimizers that have a fused target implementation (target.json
//   fused_optimizers; on npu the Optimizer section of timeline_fusion_ops.yaml: AdamW, Adam, SGD,
//   Adadelta, RMSprop).
// Why it matters: the fused optimizer updates all parameters in a few kernels instead of several
//   per parameter.
// Example: `torch.optim.AdamW(model.parameters(), lr=1e-3)`.
// Use instead: the fused optimizer target.json names (NpuFusedAdamW on npu; same arguments).
#include "analyse/rules/affinity_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

class FusedOptimizerRule : public Rule {
 public:
  std::string_view name() const override { return "fused_optimizer"; }
  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    if (ev.lookup.empty()) return;
    const auto& fused = ctx.target.facts().fused_optimizers;
    const std::string& q = ev.lookup.front();
    if (auto it = fused.find(q); it != fused.end()) affinity::Report(ctx, ev.node, q, "torch", it->second, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeFusedOptimizerRule() { return std::make_unique<FusedOptimizerRule>(); }

}  // namespace portkit::analyse
