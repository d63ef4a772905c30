// Rule: attention (Api Type `special`)
// What it finds: scaled dot-product attention written by hand:
//   `softmax(q @ k.transpose(-2, -1) * scale) @ v` (also torch.matmul, an optional dropout) —
//   aten matmul-(add)-(mul)-softmax-(dropout)-matmul in timeline_fusion_ops.yaml. Not in the
//   fallback branch of code that already takes a fused path
//   (`if hasattr(F, "scaled_dot_product_attention"): ... else: <by hand>`, `if self.fused_attn:`).
// Why it matters: the score matrix is materialised; the fused kernel never writes it out.
//   Also the multi-statement form of one function: `attn = q @ k.transpose(-2, -1) * scale`;
//   `attn = attn.softmax(dim=-1)`; `attn = self.attn_drop(attn)`; `x = (attn @ v)`, the names
//   followed through their last plain assignment (scores) and their next use (probabilities).
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

// A product of queries and transposed keys somewhere in the subtree of `n`.
bool HasScores(const PySyntax& syn, TSNode n, std::string_view src) {
  std::string_view text = NodeText(n, src);
  return (affinity::ContainsOperator(syn, n, src, "@") || affinity::ContainsCall(syn, n, src, "matmul") ||
          affinity::ContainsCall(syn, n, src, "bmm")) &&
         (affinity::ContainsCall(syn, n, src, "transpose") || text.find(".mT") != std::string_view::npos ||
          text.find(".T") != std::string_view::npos);
}

// Whether `n` computes scores, directly or through names bound earlier in its function
// (`attn = q @ k.transpose(-2, -1)`; `attn = attn * scale`; softmax(attn)).
bool ComputesScores(const PySyntax& syn, TSNode n, std::string_view src, int depth) {
  if (ts_node_is_null(n) || depth > 3) return false;
  if (HasScores(syn, n, src)) return true;
  bool found = false;
  ForEachNamedNode(n, [&](TSNode c) {
    if (found) return false;
    if (syn.Kind(c) == NodeKind::kLambda) return false;
    if (syn.Kind(c) == NodeKind::kAttribute) {  // only the object of `a.b` can be a local name
      TSNode obj = ts_node_child_by_field_id(c, syn.f_object);
      if (syn.Kind(obj) == NodeKind::kIdentifier) {
        TSNode bound = affinity::PreviousBinding(syn, src, affinity::EnclosingScope(syn, c), NodeText(obj, src),
                                                 ts_node_start_byte(c));
        found = ComputesScores(syn, bound, src, depth + 1);
        return false;
      }
      return true;
    }
    if (syn.Kind(c) == NodeKind::kIdentifier) {
      TSNode bound = affinity::PreviousBinding(syn, src, affinity::EnclosingScope(syn, c), NodeText(c, src),
                                               ts_node_start_byte(c));
      found = ComputesScores(syn, bound, src, depth + 1);
    }
    return !found;
  });
  return found;
}

// The first read of `name` after byte `after` in `scope` (not in nested scopes); null if none.
TSNode NextUse(const PySyntax& syn, TSNode scope, std::string_view src, std::string_view name, uint32_t after) {
  TSNode use{};
  ForEachNamedNode(scope, [&](TSNode c) {
    if (!ts_node_is_null(use)) return false;
    if (ts_node_end_byte(c) <= after) return false;
    NodeKind k = syn.Kind(c);
    if (!ts_node_eq(c, scope) &&
        (k == NodeKind::kFunctionDefinition || k == NodeKind::kClassDefinition || k == NodeKind::kLambda))
      return false;
    if (k == NodeKind::kIdentifier && ts_node_start_byte(c) >= after && NodeText(c, src) == name) {
      TSNode parent = ts_node_parent(c);
      bool store =
          syn.Kind(parent) == NodeKind::kAssignment && ts_node_eq(ts_node_child_by_field_id(parent, syn.f_left), c);
      bool member =
          syn.Kind(parent) == NodeKind::kAttribute && ts_node_eq(ts_node_child_by_field_id(parent, syn.f_attribute), c);
      if (!store && !member) use = c;
    }
    return true;
  });
  return use;
}

// The matmul that multiplies the probabilities `p` (the softmax result, the node `prob`) by the
// values: an enclosing `@`/matmul, or, when the probabilities are assigned to a name, the next use
// of that name (through dropout re-assignments). Null when there is none.
TSNode OutputMatmul(const PySyntax& syn, TSNode prob, std::string_view src) {
  for (int step = 0; step < 4; ++step) {
    TSNode up = affinity::Parent(syn, prob);
    if (!ts_node_is_null(up) && syn.Kind(up) == NodeKind::kArgumentList) up = affinity::Parent(syn, up);
    if (!ts_node_is_null(up) && syn.Kind(up) == NodeKind::kCall &&
        NodeText(ts_node_child_by_field_id(up, syn.f_function), src).ends_with("dropout")) {
      prob = up;
      continue;
    }
    if (ts_node_is_null(up)) return {};
    if (IsMatmul(syn, up, src)) {
      // The probabilities must be the left operand (p @ v, matmul(p, v)).
      TSNode left = syn.Kind(up) == NodeKind::kBinaryOperator
                        ? ts_node_child_by_field_id(up, syn.f_left)
                        : ts_node_named_child(ts_node_child_by_field_id(up, syn.f_arguments), 0);
      while (!ts_node_is_null(left) && syn.Kind(left) == NodeKind::kParenthesizedExpression)
        left = ts_node_named_child(left, 0);
      return ts_node_eq(left, prob) ? up : TSNode{};
    }
    if (syn.Kind(up) != NodeKind::kAssignment || !ts_node_eq(ts_node_child_by_field_id(up, syn.f_right), prob))
      return {};
    TSNode left = ts_node_child_by_field_id(up, syn.f_left);
    if (syn.Kind(left) != NodeKind::kIdentifier) return {};
    TSNode use = NextUse(syn, affinity::EnclosingScope(syn, up), src, NodeText(left, src), ts_node_end_byte(up));
    if (ts_node_is_null(use)) return {};
    // `attn = self.attn_drop(attn)`: the dropout module's call passes the probabilities on.
    TSNode parent = affinity::Parent(syn, use);
    if (syn.Kind(parent) == NodeKind::kArgumentList) {
      TSNode call = affinity::Parent(syn, parent);
      std::string_view fn = NodeText(ts_node_child_by_field_id(call, syn.f_function), src);
      if (fn.ends_with("drop") || fn.ends_with("dropout")) {
        prob = call;
        continue;
      }
    }
    prob = use;
  }
  return {};
}

class AttentionRule : public Rule {
 public:
  std::string_view name() const override { return "attention"; }
  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    const std::string* api = ctx.target.facts().FusedApi(name());
    if (!api) return;  // the target has no fused replacement
    // `attn.softmax(-1)` of a receiver whose type is not inferred counts too: the scores it must
    // be computed from (a product with transposed keys) are checked below.
    if (!affinity::IsCallOf(ev, {"torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax"}) &&
        !(ev.method == "softmax" && ev.receiver_unknown))
      return;
    const auto& syn = ctx.syntax;
    if (!ComputesScores(syn, ev.node, ctx.source, 0)) return;
    TSNode out = OutputMatmul(syn, ev.node, ctx.source);
    if (ts_node_is_null(out)) return;
    // The hand-written path of code that already calls a fused kernel when it can.
    if (affinity::InFallbackOfFused(syn, ctx.source, out,
                                    {"scaled_dot_product_attention", "sdpa", "flash", "fused", "fusion_attention",
                                     "memory_efficient_attention", "xformers"}))
      return;
    affinity::Report(ctx, out, "attention (matmul-softmax-matmul)", "special", *api, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeAttentionRule() { return std::make_unique<AttentionRule>(); }

}  // namespace portkit::analyse
