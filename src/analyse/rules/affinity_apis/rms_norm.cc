// Rule: rms_norm (Api Type `special`)
// What it finds: RMSNorm written by hand: `x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`
//   (also `** 2` and `torch.pow`) — the aten sequence pow-mean-add-rsqrt-mul of
//   msprof-analyze's timeline_fusion_ops.yaml.
// Why it matters: five kernels and four intermediate tensors instead of one fused kernel.
// Example: `h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)`.
// Use instead: the target's fused RMSNorm (target.json fused_apis "rms_norm", e.g.
//   npu_rms_norm(x, weight, epsilon) on npu).
#include "analyse/rules/affinity_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

class RmsNormRule : public Rule {
 public:
  std::string_view name() const override { return "rms_norm"; }
  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    const std::string* api = ctx.target.facts().FusedApi(name());
    if (!api) return;  // the target has no fused replacement
    if (!affinity::IsCallOf(ev, {"torch.rsqrt", "torch.Tensor.rsqrt"})) return;
    const auto& syn = ctx.syntax;
    bool mean = affinity::ContainsCall(syn, ev.node, ctx.source, "mean");
    bool square = affinity::ContainsCall(syn, ev.node, ctx.source, "pow") ||
                  affinity::ContainsOperator(syn, ev.node, ctx.source, "**") ||
                  affinity::ContainsCall(syn, ev.node, ctx.source, "square");
    if (!mean || !square) return;
    TSNode parent = affinity::Parent(syn, ev.node);
    TSNode at = ev.node;
    if (!ts_node_is_null(parent) && syn.Kind(parent) == NodeKind::kBinaryOperator &&
        affinity::OperatorOf(parent, ctx.source) == "*")
      at = parent;
    affinity::Report(ctx, at, "RMSNorm (pow-mean-add-rsqrt-mul)", "special", *api, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeRmsNormRule() { return std::make_unique<RmsNormRule>(); }

}  // namespace portkit::analyse
