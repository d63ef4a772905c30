// Rule: affinity_torch (Api Type `torch`)
// What it finds: calls of torch APIs that have a faster affinity replacement on the target, from
//   the target's templates (data/targets/<target>/affinity.json "torch"), e.g. torch.matmul, torch.roll,
//   torch.nn.SiLU.
// Why it matters: the fused replacement avoids extra kernels on the target.
// Example: `torch.roll(x, 1, 0)` (npu: contrib.function.roll of the target's module).
// Use instead: the Affinity Api Name of the row.
#include "analyse/affinity.h"
#include "analyse/rules/affinity_apis/rules.h"

namespace portkit::analyse {
namespace {

class AffinityTorchRule : public Rule {
 public:
  std::string_view name() const override { return "affinity_torch"; }
  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    if (!ctx.data.affinity) return;
    for (const auto& q : ev.lookup) {
      if (const auto* t = ctx.data.affinity->FindTorch(q)) {
        affinity::Report(ctx, ev.node, q, "torch", t->replacement, name());
        return;
      }
    }
  }
};

}  // namespace

std::unique_ptr<Rule> MakeAffinityTorchRule() { return std::make_unique<AffinityTorchRule>(); }

}  // namespace portkit::analyse
