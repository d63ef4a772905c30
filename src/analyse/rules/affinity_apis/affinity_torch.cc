// Rule: affinity_torch (Api Type `torch`)
// What it finds: calls of torch APIs that have a faster affinity replacement on the target, from
//   the target's templates (data/targets/<target>/affinity.json "torch"), e.g. torch.matmul, torch.roll,
//   torch.nn.SiLU.
// Why it matters: the fused replacement avoids extra kernels on the target.
// Example: `torch.roll(x, 1, 0)` (npu: contrib.function.roll of the target's module);
//   `torch.matmul(q, k.transpose(-2, -1))` (npu: contrib.function.matmul_transpose).
//   A template row may name a guard (`requires`): `transposed_second_argument` reports
//   torch.matmul only when its second operand is `b.transpose(-2, -1)`, `b.transpose(-1, -2)` or
//   `b.mT` (matmul_transpose(a, b) computes a @ b.transpose(-2, -1)); a plain matmul is not
//   reported. A guard portkit does not know suppresses the row.
// Use instead: the Affinity Api Name of the row.
#include "analyse/affinity.h"
#include "analyse/rules/affinity_apis/rules.h"

namespace portkit::analyse {
namespace {

bool GuardHolds(const std::string& guard, const CallEvent& ev, const RuleContext& ctx) {
  if (guard.empty()) return true;
  if (guard == "transposed_second_argument") {
    const Argument* b = ev.Positional(1);
    if (!b) b = ev.Keyword("other");
    return b && !ev.has_splat() && affinity::IsTransposedLastTwo(ctx.syntax, b->value, ctx.source);
  }
  return false;
}

class AffinityTorchRule : public Rule {
 public:
  std::string_view name() const override { return "affinity_torch"; }
  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    if (!ctx.data.affinity) return;
    for (const auto& q : ev.lookup) {
      if (const auto* t = ctx.data.affinity->FindTorch(q)) {
        if (GuardHolds(t->requires_guard, ev, ctx)) affinity::Report(ctx, ev.node, q, "torch", t->replacement, name());
        return;
      }
    }
  }
};

}  // namespace

std::unique_ptr<Rule> MakeAffinityTorchRule() { return std::make_unique<AffinityTorchRule>(); }

}  // namespace portkit::analyse
