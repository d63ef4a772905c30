// Rule: unknown_receiver
// What it finds: a call of a method that only torch tensors or modules have (`.pin_memory()`,
//   `.record_stream()`, see data/python/torch_only_methods.tsv) on an object whose type the analyser
//   could not infer, when knowing the type could change the verdict: some candidate owner's method
//   (torch.Tensor.m, torch.nn.Module.m) is unsupported on the target or in neither of
//   its lists. Calls whose every candidate is supported (`.numpy()`, `.add_()` on npu) and the
//   target's own methods (`.npu()` on npu) are not reported; CUDA-only methods (`.cuda()`) are
//   cuda_specific findings, not unknown ones; nor is a method that a class of the project defines
//   and that takes the call (`get_accelerator().pin_memory(t)` may be the project's own object).
// Why it matters: such calls are usually torch calls the target may not support; a silent miss
//   would hide them.
// Example: `def pin(p): return p.pin_memory()` → unknown, "receiver type not inferred".
// Use instead: annotate the parameter (`p: torch.Tensor`) so the call is classified exactly.
#include <algorithm>

#include "analyse/custom_ops.h"
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
    const Target& t = ctx.target;
    const auto& cuda_methods = t.cuda().methods;
    // A CUDA-only method (`.cuda()`) is reported by cuda_specific already; a second, unknown
    // row for the same call would change nothing.
    if (std::find(cuda_methods.begin(), cuda_methods.end(), method) != cuda_methods.end()) return;
    // A method that a class of the project defines and that takes the call: the receiver may as
    // well be that object (`get_accelerator().pin_memory(t)`), so its type would not settle it.
    CallShape shape;
    for (const auto& a : ev.args) {
      if (a.splat) shape.star = true;
      else if (!a.keyword.empty()) shape.keywords.push_back(a.keyword);
      else ++shape.positional;
    }
    if (ctx.custom_ops.PythonMethodFits(method, shape)) return;
    bool cuda_only = false;
    std::vector<std::string> candidates;
    if (owners->find("tensor") != std::string::npos) candidates.push_back("torch.Tensor." + method);
    if (owners->find("module") != std::string::npos) candidates.push_back("torch.nn.Module." + method);
    // Only candidates whose classification could change a decision.
    std::string op, unsupported;
    bool tensor = false, module = false;
    for (const auto& c : candidates) {
      if (IsTargetApi(t, c)) continue;
      bool matters = cuda_only;
      if (!t.all_supported()) {
        if (t.Unsupported(c)) {
          matters = true;
          unsupported += " " + c + " is unsupported on " + t.name() + ".";
        } else if (!t.Supported(c)) {
          matters = true;  // in neither list
        }
      }
      if (!matters) continue;
      op += (op.empty() ? "" : "|") + c;
      (c[6] == 'T' ? tensor : module) = true;
    }
    if (op.empty()) return;
    std::string tip = "Receiver type not inferred: ." + method + "() is a method of " +
                      (tensor && module ? "torch tensors and modules"
                       : tensor         ? "torch tensors"
                                        : "torch modules") +
                      "; annotate the receiver to classify it exactly." + unsupported;
    ctx.Report(ev.node, op, tip, Category::kUnknown, Confidence::kLow, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeUnknownReceiverRule() { return std::make_unique<UnknownReceiverRule>(); }

}  // namespace portkit::analyse
