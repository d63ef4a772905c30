// Rule: swiglu (Api Type `special`)
// What it finds: SwiGLU written by hand: `F.silu(a) * b` (aten chunk/slice-silu-mul in
//   timeline_fusion_ops.yaml).
// Why it matters: silu and mul (and the split) fuse into one kernel on the target.
// Example: `gate, up = h.chunk(2, dim=-1); out = F.silu(gate) * up`.
// Use instead: the target's fused SwiGLU (target.json fused_apis "swiglu", e.g.
//   npu_swiglu(h, dim=-1) on npu).
#include "analyse/rules/affinity_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

class SwigluRule : public Rule {
 public:
  std::string_view name() const override { return "swiglu"; }
  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    const std::string* api = ctx.target.facts().FusedApi(name());
    if (!api) return;  // the target has no fused replacement
    if (!affinity::IsCallOf(ev, {"torch.nn.functional.silu", "torch.Tensor.silu"})) return;
    TSNode parent = affinity::Parent(ctx.syntax, ev.node);
    if (ts_node_is_null(parent) || ctx.syntax.Kind(parent) != NodeKind::kBinaryOperator ||
        affinity::OperatorOf(parent, ctx.source) != "*")
      return;
    affinity::Report(ctx, parent, "SwiGLU (silu-mul)", "special", *api, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeSwigluRule() { return std::make_unique<SwigluRule>(); }

}  // namespace portkit::analyse
