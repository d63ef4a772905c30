// Rule: unknown_receiver
// What it finds: a call of a method that only torch tensors or modules have (`.cuda()`,
//   `.pin_memory()`, see data/python/torch_only_methods.tsv) on an object whose type the analyser
//   could not infer — reported in unknown_api.csv rather than dropped.
// Why it matters: such calls are usually torch calls the target may not support; a silent miss
//   would hide them.
// Example: `def move(p): return p.cuda()` → unknown, "receiver type not inferred".
// Use instead: annotate the parameter (`p: torch.Tensor`) so the call is classified exactly.
#include "analyse/rules/torch_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

class UnknownReceiverRule : public Rule {
 public:
  std::string_view name() const override { return "unknown_receiver"; }

  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    if (ev.method.empty() || !ev.receiver_unknown) return;
    std::string method(ev.method);
    const std::string* owners = ctx.target.TorchOnlyMethod(method);
    if (!owners) return;
    std::vector<std::string> candidates;
    if (owners->find("tensor") != std::string::npos) candidates.push_back("torch.Tensor." + method);
    if (owners->find("module") != std::string::npos) candidates.push_back("torch.nn.Module." + method);
    std::string op;
    for (const auto& c : candidates) op += (op.empty() ? "" : "|") + c;
    std::string tip = "Receiver type not inferred: ." + method + "() is a method of " +
                      (candidates.size() > 1 ? "torch tensors and modules" :
                       owners->find("tensor") != std::string::npos ? "torch tensors" : "torch modules") +
                      "; annotate the receiver to classify it exactly.";
    if (!ctx.target.all_supported()) {
      for (const auto& c : candidates) {
        if (ctx.target.Unsupported(c)) tip += " " + c + " is unsupported on " + ctx.target.name() + ".";
      }
    }
    ctx.Report(ev.node, op, tip, Category::kUnknown, Confidence::kLow, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeUnknownReceiverRule() { return std::make_unique<UnknownReceiverRule>(); }

}  // namespace portkit::analyse
