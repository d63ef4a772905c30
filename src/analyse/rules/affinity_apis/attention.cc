// Rule: attention (Api Type `special`)
// What it finds: scaled dot-product attention written by hand:
//   `softmax(q @ k.transpose(-2, -1) * scale) @ v` (also torch.matmul, an optional dropout) —
//   aten matmul-(add)-(mul)-softmax-(dropout)-matmul in timeline_fusion_ops.yaml.
// Why it matters: the score matrix is materialised; the fused kernel never writes it out.
// Example: `attn = torch.softmax(q @ k.transpose(-2, -1) / d ** 0.5, dim=-1) @ v`.
// Use instead: the target's fused attention (target.json fused_apis "attention", e.g.
//   npu_fusion_attention on npu), or F.scaled_dot_product_attention.
#include "analyse/rules/affinity_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

bool IsMatmul(const PySyntax& syn, TSNode n, std::string_view src) {
  if (syn.Kind(n) == NodeKind::kBinaryOperator) return affinity::OperatorOf(n, src) == "@";
  if (syn.Kind(n) != NodeKind::kCall) return false;
  std::string_view fn = NodeText(ts_node_child_by_field_id(n, syn.f_function), src);
  return fn.ends_with("matmul") || fn.ends_with("bmm");
}

class AttentionRule : public Rule {
 public:
  std::string_view name() const override { return "attention"; }
  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    const std::string* api = ctx.target.facts().FusedApi(name());
    if (!api) return;  // the target has no fused replacement
    if (!affinity::IsCallOf(ev, {"torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax"}))
      return;
    const auto& syn = ctx.syntax;
    // Scores: a matmul with a transposed operand inside the softmax call.
    bool scores = (affinity::ContainsOperator(syn, ev.node, ctx.source, "@") ||
                   affinity::ContainsCall(syn, ev.node, ctx.source, "matmul") ||
                   affinity::ContainsCall(syn, ev.node, ctx.source, "bmm")) &&
                  (affinity::ContainsCall(syn, ev.node, ctx.source, "transpose") ||
                   ctx.Text(ev.node).find(".mT") != std::string_view::npos ||
                   ctx.Text(ev.node).find(".T") != std::string_view::npos);
    if (!scores) return;
    // Output: the probabilities (possibly after dropout) multiply the values.
    TSNode up = affinity::Parent(syn, ev.node);
    if (!ts_node_is_null(up) && syn.Kind(up) == NodeKind::kArgumentList) up = affinity::Parent(syn, up);
    if (!ts_node_is_null(up) && syn.Kind(up) == NodeKind::kCall &&
        ctx.Text(ts_node_child_by_field_id(up, syn.f_function)).ends_with("dropout"))
      up = affinity::Parent(syn, up);
    if (!ts_node_is_null(up) && syn.Kind(up) == NodeKind::kArgumentList) up = affinity::Parent(syn, up);
    if (ts_node_is_null(up) || !IsMatmul(syn, up, ctx.source)) return;
    affinity::Report(ctx, up, "attention (matmul-softmax-matmul)", "special", *api, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeAttentionRule() { return std::make_unique<AttentionRule>(); }

}  // namespace portkit::analyse
