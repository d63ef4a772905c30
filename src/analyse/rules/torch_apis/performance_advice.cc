// Rule: performance_advice
// What it finds: (1) APIs with a faster target alternative (fused optimizers, NpuLinear, anomaly
//   detection left on); (2) calls whose arguments leave performance behind: DataLoader without
//   pin_memory=True or with num_workers=0, DistributedDataParallel without bucket_cap_mb=500,
//   `.to(device)` without non_blocking=True (data/targets/<target>/advice.json "parameters").
// Why it matters: these are the first fixes the target's performance guide asks for.
// Example: `DataLoader(ds, batch_size=64)` → pin_memory and num_workers advice.
// Use instead: the value named in the tip.
#include "analyse/rules/torch_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

bool LooksLikeDtype(const Argument& a) {
  return a.type.kind == ValueKind::kExternal && a.type.name.rfind("torch.", 0) == 0 && a.type.name != "torch.device";
}

class PerformanceAdviceRule : public Rule {
 public:
  std::string_view name() const override { return "performance_advice"; }

  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    const Advice& advice = ctx.target.advice();
    for (const auto& q : ev.lookup) {
      bool hit = false;
      for (const auto& [api, tip] : advice.performance) {
        if (api == q) {
          ctx.Report(ev.node, api, tip, Category::kPerformance, Confidence::kHigh, name());
          hit = true;
          break;
        }
      }
      if (hit) break;
    }
    for (const auto& rule : advice.parameters) {
      if (rule.method) {
        if (ev.method != rule.api) continue;
        // `.to(torch.float16)` converts dtype; non_blocking only matters for device copies.
        if (const Argument* first = ev.Positional(0); first && LooksLikeDtype(*first)) continue;
        if (ev.args.empty() || ev.callee.kind == ValueKind::kUserFunction) continue;
      } else if (ev.lookup.empty() || ev.lookup.front() != rule.api) {
        continue;
      }
      Check(ev, rule, ctx);
    }
  }

 private:
  void Check(const CallEvent& ev, const ParameterRule& rule, RuleContext& ctx) {
    if (ev.has_splat()) return;  // **kwargs may set it
    const Argument* arg = ev.Keyword(rule.parameter);
    for (size_t p : rule.positions) {
      if (arg) break;
      // Method rules: a positional non_blocking must be a literal boolean to count.
      const Argument* cand = ev.Positional(p);
      if (cand && (!rule.method || ctx.Text(cand->value) == "True" || ctx.Text(cand->value) == "False")) arg = cand;
    }
    std::string value = arg ? std::string(ctx.Text(arg->value)) : rule.default_value;
    bool literal = !arg || arg->type.kind == ValueKind::kOther;
    if (!literal) return;  // a variable: its value is not known statically
    bool bad = rule.has_expected ? value != rule.expected : value == rule.unexpected;
    if (!bad) return;
    std::string op = rule.method ? "." + rule.api + "(" + rule.parameter + ")" : rule.api + "(" + rule.parameter + ")";
    ctx.Report(ev.node, op, rule.tip, Category::kPerformance, Confidence::kHigh, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakePerformanceAdviceRule() { return std::make_unique<PerformanceAdviceRule>(); }

}  // namespace portkit::analyse
