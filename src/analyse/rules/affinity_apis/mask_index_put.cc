// Rule: mask_index_put (Api Type `special`)
// What it finds: an item assignment through a boolean mask, `x[cond] = v`, where the index is a
//   tensor (a comparison of tensors, or a value typed as a tensor).
// Why it matters: index_put with a mask is slow on the target; a fused op does it in one kernel.
// Example: `cond = x < 0.5; x[cond] = 0.`.
// Use instead: `x = <fused>(x, cond, value)`, the target's fused_apis "mask_index_put" in
//   target.json (npu_fast_condition_index_put on npu).
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
    if (ts_node_is_null(assignment)) return;
    if (base.kind == ValueKind::kOther || base.kind == ValueKind::kExternal) return;
    bool mask = index.kind == ValueKind::kTensor;
    if (!mask) {
      // An index written as a comparison (`x[x < 0] = 0`) is a mask whatever x's type.
      uint32_t count = ts_node_named_child_count(target);
      for (uint32_t i = 1; i < count; ++i)
        mask |= ctx.syntax.Kind(ts_node_named_child(target, i)) == NodeKind::kComparisonOperator;
      mask &= base.kind == ValueKind::kTensor || base.kind == ValueKind::kUnknown;
    }
    if (!mask || index.kind == ValueKind::kTensorSeq) return;
    std::string text(ctx.Text(assignment));
    if (size_t nl = text.find('\n'); nl != std::string::npos) text = text.substr(0, nl);
    affinity::Report(ctx, assignment, text, "special", *api, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeMaskIndexPutRule() { return std::make_unique<MaskIndexPutRule>(); }

}  // namespace portkit::analyse
