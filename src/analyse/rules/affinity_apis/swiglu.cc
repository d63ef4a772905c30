// Rule: swiglu (Api Type `special`)
// What it finds: SwiGLU written by hand: `F.silu(a) * b` (aten chunk/slice-silu-mul in
//   timeline_fusion_ops.yaml).
// Why it matters: silu and mul (and the split) fuse into one kernel on the target.
// Example: `gate, up = h.chunk(2, dim=-1); out = F.silu(gate) * up`.
// Use instead: torch_npu.npu_swiglu(h, dim=-1).
#include "analyse/rules/affinity_apis/rules.h"

namespace portkit::analyse {
namespace {

class SwigluRule : public Rule {
 public:
  std::string_view name() const override { return "swiglu"; }
  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    if (!affinity::IsCallOf(ev, {"torch.nn.functional.silu", "torch.Tensor.silu"})) return;
    TSNode parent = affinity::Parent(ctx.syntax, ev.node);
    if (ts_node_is_null(parent) || ctx.syntax.Kind(parent) != NodeKind::kBinaryOperator ||
        affinity::OperatorOf(parent, ctx.source) != "*")
      return;
    affinity::Report(ctx, parent, "SwiGLU (silu-mul)", "special", "torch_npu.npu_swiglu", name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeSwigluRule() { return std::make_unique<SwigluRule>(); }

}  // namespace portkit::analyse
