// Rule: fp64_usage
// What it finds: float64 in code that runs on the device, on a target whose target.json says it
//   has no fast fp64 (`fp64`): the dtypes `torch.float64` / `torch.double` used as values
//   (`dtype=torch.float64`, `.to(torch.double)`) and `.double()` calls on tensors and modules.
//   Type tests (`x.dtype == torch.float64`, `isinstance` arguments) are not uses.
// Why it matters: an accelerator without fp64 units runs float64 operators on a slow fallback
//   or not at all; float64 collectives move twice the bytes.
// Example: `x = torch.zeros(3, dtype=torch.float64).npu()` → "float64 has no AI Core kernels ...".
// Use instead: float32 on the device (cast to float64 on the host where the precision is needed).
#include "analyse/rules/torch_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

class Fp64UsageRule : public Rule {
 public:
  std::string_view name() const override { return "fp64_usage"; }

  void OnAttribute(const AttributeEvent& ev, RuleContext& ctx) override {
    if (ev.type_test || ev.store) return;
    if (ev.qname != "torch.float64" && ev.qname != "torch.double") return;
    Report(ev.node, ev.qname, ctx);
  }

  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    if (ev.method != "double" || !ev.args.empty()) return;
    // Only receivers known to be torch tensors or modules (numpy has astype, Python floats none).
    const std::string& owner = ev.callee.owner;
    if (ev.callee.kind != ValueKind::kMethod || (owner != "torch.Tensor" && owner.rfind("torch.nn.", 0) != 0)) return;
    Report(ev.node, ev.lookup.empty() ? ".double()" : ev.lookup.front(), ctx);
  }

 private:
  void Report(TSNode node, std::string op, RuleContext& ctx) {
    const std::string& how = ctx.target.facts().fp64;
    if (how.empty()) return;  // the target runs float64 natively
    ctx.Report(node, std::move(op), how + ".", Category::kPerformance, Confidence::kMedium, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeFp64UsageRule() { return std::make_unique<Fp64UsageRule>(); }

}  // namespace portkit::analyse
