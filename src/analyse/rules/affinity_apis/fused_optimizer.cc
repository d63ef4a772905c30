// Rule: fused_optimizer (Api Type `torch`)
// What it finds: torch optimizers that have a fused target implementation (the Optimizer section
//   of timeline_fusion_ops.yaml): AdamW, Adam, SGD, Adadelta, RMSprop.
// Why it matters: the fused optimizer updates all parameters in a few kernels instead of several
//   per parameter.
// Example: `torch.optim.AdamW(model.parameters(), lr=1e-3)`.
// Use instead: torch_npu.optim.NpuFusedAdamW (same arguments).
#include "analyse/rules/affinity_apis/rules.h"

namespace portkit::analyse {
namespace {

class FusedOptimizerRule : public Rule {
 public:
  std::string_view name() const override { return "fused_optimizer"; }
  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    static constexpr std::string_view kOptimizers[] = {"AdamW", "Adam", "SGD", "Adadelta", "RMSprop"};
    if (ev.lookup.empty()) return;
    const std::string& q = ev.lookup.front();
    for (auto opt : kOptimizers) {
      if (q == "torch.optim." + std::string(opt)) {
        affinity::Report(ctx, ev.node, q, "torch", "torch_npu.optim.NpuFused" + std::string(opt), name());
        return;
      }
    }
  }
};

}  // namespace

std::unique_ptr<Rule> MakeFusedOptimizerRule() { return std::make_unique<FusedOptimizerRule>(); }

}  // namespace portkit::analyse
