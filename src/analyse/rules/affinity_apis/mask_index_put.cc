// Rule: mask_index_put (Api Type `special`)
// What it finds: an item assignment of a scalar through a boolean mask, `x[cond] = 0.`, where x
//   is a tensor and cond a comparison (`x < 0.5`, `~m`, `m1 & m2`, isnan, or a name bound to one).
//   Not reported: numpy arrays or receivers of unknown type, masks made by numpy
//   (`x[np.asarray(s) > 0.5] = 0`), integer or slice indexes, tensor values (`x[m] = y[m]`).
// Why it matters: index_put with a mask is slow on the target; a fused op does it in one kernel.
// Example: `cond = x < 0.5; x[cond] = 0.`.
// Use instead: `x = <fused>(x, cond, value)`, the target's fused_apis "mask_index_put" in
//   target.json (torch_npu.contrib.function.npu_fast_condition_index_put on npu). It returns a new
//   tensor: code that relies on x being changed in place (x is a parameter, an attribute, or
//   another name refers to it) must keep the in-place write; `migrate --unsafe` rewrites only
//   locals it can prove are not shared.
#include "analyse/rules/affinity_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

class MaskIndexPutRule : public Rule {
 public:
  std::string_view name() const override { return "mask_index_put"; }
  void OnSubscriptAssign(TSNode assignment, TSNode target, const Value& base, const Value& index,
                         RuleContext& ctx) override {
    const std::string* api = ctx.target.facts().FusedApi(name());
    if (!api) return;  // the target has no fused replacement
    if (!affinity::IsMaskIndexPut(ctx.syntax, ctx.source, assignment, target, base, index)) return;
    std::string text(ctx.Text(assignment));
    if (size_t nl = text.find('\n'); nl != std::string::npos) text = text.substr(0, nl);
    affinity::Report(ctx, assignment, text, "special", *api, name());
  }
};

}  // namespace

namespace affinity {
namespace {

// A mask made by numpy (`np.asarray(s) > 0.5`, `np.isnan(a)`, `t.numpy() > 0`, `arr.astype(bool)`
// with `arr` bound to one, or a name bound to any of these): indexing a tensor with it is a
// host-side index, not the masked index_put the fused op does. Only the value's producers are
// followed (operands, receivers of methods, names' bindings), not the arguments of calls
// (`torch.sum(torch.FloatTensor(a.astype(np.int32)))` is a tensor).
bool IsNumpyExpression(const PySyntax& syn, TSNode n, std::string_view src, int depth) {
  while (!ts_node_is_null(n) && syn.Kind(n) == NodeKind::kParenthesizedExpression && ts_node_named_child_count(n) == 1)
    n = ts_node_named_child(n, 0);
  if (ts_node_is_null(n) || depth > 4) return false;
  switch (syn.Kind(n)) {
    case NodeKind::kComparisonOperator:
    case NodeKind::kBinaryOperator:
    case NodeKind::kBooleanOperator:
    case NodeKind::kUnaryOperator:
    case NodeKind::kNotOperator: {
      bool numpy = false;
      for (TSNode c : NamedChildren(n)) numpy = numpy || IsNumpyExpression(syn, c, src, depth);
      return numpy;
    }
    case NodeKind::kCall: {
      TSNode fn = ts_node_child_by_field_id(n, syn.f_function);
      if (syn.Kind(fn) != NodeKind::kAttribute) return false;
      return IsNumpyExpression(syn, fn, src, depth);
    }
    case NodeKind::kAttribute: {
      TSNode obj = ts_node_child_by_field_id(n, syn.f_object);
      std::string_view obj_text = NodeText(obj, src);
      if (obj_text == "np" || obj_text == "numpy") return true;
      if (NodeText(ts_node_child_by_field_id(n, syn.f_attribute), src) == "numpy") return true;
      return IsNumpyExpression(syn, obj, src, depth);
    }
    case NodeKind::kSubscript: return IsNumpyExpression(syn, ts_node_child_by_field_id(n, syn.f_value), src, depth);
    case NodeKind::kIdentifier: {
      TSNode bound = PreviousBinding(syn, src, EnclosingScope(syn, n), NodeText(n, src), ts_node_start_byte(n));
      return IsNumpyExpression(syn, bound, src, depth + 1);
    }
    default: return false;
  }
}

bool IsNumpyMask(const PySyntax& syn, TSNode n, std::string_view src, const Value& index) {
  if ((index.kind == ValueKind::kInstance || index.kind == ValueKind::kExternal) && index.name.rfind("numpy.", 0) == 0)
    return true;
  return IsNumpyExpression(syn, n, src, 0);
}

}  // namespace

bool IsMaskIndexPut(const PySyntax& syn, std::string_view src, TSNode assignment, TSNode target, const Value& base,
                    const Value& index) {
  if (ts_node_is_null(assignment) || syn.Kind(assignment) != NodeKind::kAssignment) return false;
  if (base.kind != ValueKind::kTensor || index.kind == ValueKind::kTensorSeq) return false;
  if (ts_node_named_child_count(target) != 2) return false;  // one index: x[cond]
  TSNode right = ts_node_child_by_field_id(assignment, syn.f_right);
  TSNode mask = ts_node_named_child(target, 1);
  return IsBoolMask(syn, mask, src) && IsScalar(syn, right, src) && !IsNumpyMask(syn, mask, src, index);
}

}  // namespace affinity

std::unique_ptr<Rule> MakeMaskIndexPutRule() { return std::make_unique<MaskIndexPutRule>(); }

}  // namespace portkit::analyse
