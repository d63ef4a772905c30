// Rule: rotary (Api Type `special`)
// What it finds: the rotate-half of rotary position embeddings, `torch.cat((-x2, x1), dim=-1)`
//   (aten chunk/slice-neg-cat-mul-add in timeline_fusion_ops.yaml).
// Why it matters: the slice, neg, cat, two muls and an add become one fused kernel.
// Example: `rotate_half = torch.cat((-x[..., d:], x[..., :d]), dim=-1)`; `q * cos + rotate_half * sin`.
// Use instead: the target's fused rotary embedding (target.json fused_apis "rotary", e.g.
//   npu_rotary_mul(x, cos, sin) on npu).
#include "analyse/rules/affinity_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

class RotaryRule : public Rule {
 public:
  std::string_view name() const override { return "rotary"; }
  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    const std::string* api = ctx.target.facts().FusedApi(name());
    if (!api) return;  // the target has no fused replacement
    if (!affinity::IsCallOf(ev, {"torch.cat", "torch.concat", "torch.concatenate"})) return;
    const Argument* first = ev.Positional(0);
    if (!first) return;
    const auto& syn = ctx.syntax;
    NodeKind k = syn.Kind(first->value);
    if ((k != NodeKind::kTuple && k != NodeKind::kList) || ts_node_named_child_count(first->value) != 2) return;
    TSNode head = ts_node_named_child(first->value, 0);
    if (syn.Kind(head) != NodeKind::kUnaryOperator || ctx.Text(head).substr(0, 1) != "-") return;
    affinity::Report(ctx, ev.node, "rotary embedding (neg-cat-mul-add)", "special", *api, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeRotaryRule() { return std::make_unique<RotaryRule>(); }

}  // namespace portkit::analyse
