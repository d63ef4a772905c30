// Rule: api_support
// What it finds: calls of torch APIs (functions, classes, methods of typed receivers, decorators)
//   that the target does not support for the chosen torch version (unsupported_api.csv), and
//   torch.* calls that are in neither of the target's lists (unknown_api.csv). Non-call references
//   (`dtype=torch.float64`, `norm=nn.SyncBatchNorm`, `torch.backends.cudnn.benchmark = True`) are
//   reported only when listed as unsupported (confidence medium: the use happens later, through a
//   value; third_party does not count them as offences), monkey-patching stores (`F.avg_pool3d =
//   wrap(F.avg_pool3d)`, both sides) never; type tests and keys (`isinstance(m, nn.MaxPool1d)`,
//   `{nn.AdaptiveMaxPool2d: hook}`, `type(m) is nn.X`) are not uses and are not reported. The
//   target's own APIs (`torch.npu.*`, `x.npu()` for npu, from its target.json) are never unknown;
//   a method is unknown only when torch has it (some torch version's list names it):
//   `model.init_weights()` on an nn.Module or `torch.__version__.split()` are not torch APIs;
//   APIs whose verdict cannot change on a device target are never unknown
//   (data/python/torch_never_unknown.tsv: `torch.Size`, `nn.Parameter`, `torch.LongTensor([..])`,
//   `torch.fx`, `torch.multiprocessing`, DTensor placements, other vendors' `torch.mlu.*`).
// Why it matters: an unsupported API fails or falls back to the CPU on the target.
// Example: `torch.cdist(a, b)` with `-v 2.1.0` on npu → unsupported.
// Use instead: the note from the support list, or an equivalent supported API.
#include "analyse/rules/torch_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

bool IsTorchName(const std::string& q) { return q.rfind("torch.", 0) == 0; }

// Whether a call in neither list is worth reporting as unknown: not the target's own API, not an
// attribute of a value (`torch.__version__.split`), and for a method, one that torch has.
bool MayBeUnknown(const CallEvent& ev, const Target& t) {
  const std::string& q = ev.lookup.front();
  if (IsTargetApi(t, q)) return false;
  // Host-only APIs (torch.Size, nn.Parameter, legacy CPU constructors, torch.fx, ...) and other
  // vendors' device modules (data/python/torch_never_unknown.tsv): the verdict cannot change.
  if (t.NeverUnknown(q)) return false;
  // torch.ops.<namespace>.<op>: operators registered by libraries (custom_cuda_op matches the
  // project's own), not torch APIs that a support list could name.
  if (q.rfind("torch.ops.", 0) == 0) return false;
  // A dunder inside the name is an attribute of a value (torch.__version__, x.__class__).
  for (size_t pos = q.find(".__"); pos != std::string::npos; pos = q.find(".__", pos + 1))
    if (q.find('.', pos + 1) != std::string::npos) return false;
  if (ev.callee.kind != ValueKind::kMethod) return true;
  for (const auto& name : ev.lookup)
    if (t.KnownInAnyVersion(name)) return true;
  // Methods the lists lack but torch tensors/modules have (data/python/torch_only_methods.tsv).
  if (const std::string* owners = t.TorchOnlyMethod(std::string(ev.method))) {
    const std::string& owner = ev.callee.owner;
    if (owner == "torch.Tensor") return owners->find("tensor") != std::string::npos;
    if (owner.rfind("torch.nn.", 0) == 0) return owners->find("module") != std::string::npos;
  }
  return false;
}

class ApiSupportRule : public Rule {
 public:
  std::string_view name() const override { return "api_support"; }

  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    if (ev.lookup.empty() || !IsTorchName(ev.lookup.front())) return;
    // A member of a user's nn.Module subclass that is not a torch method (self.layer1(x)) is the
    // user's own attribute: classify it only when a list names it.
    bool user_member = ev.callee.kind == ValueKind::kMethod && ev.callee.cls != nullptr;
    Classify(ev.node, ev.lookup, ctx, /*report_unknown=*/!user_member && MayBeUnknown(ev, ctx.target),
             /*call=*/true);
  }

  void OnAttribute(const AttributeEvent& ev, RuleContext& ctx) override {
    // A store into a torch name (`F.avg_pool3d = wrap(F.avg_pool3d)`) monkey-patches it, and the
    // wrapped original on the right is not a use either.
    if (ev.type_test || ev.store || !IsTorchName(ev.qname) || IsPatchedOriginal(ev.node, ctx)) return;
    Classify(ev.node, {ev.qname}, ctx, /*report_unknown=*/false, /*call=*/false);
  }

 private:
  // Whether `node` lies on the right of an assignment whose target has the same text.
  static bool IsPatchedOriginal(TSNode node, RuleContext& ctx) {
    std::string_view text = ctx.Text(node);
    for (TSNode p = ts_node_parent(node); !ts_node_is_null(p); p = ts_node_parent(p)) {
      NodeKind k = ctx.syntax.Kind(p);
      if (k == NodeKind::kAssignment) {
        TSNode left = ts_node_child_by_field_id(p, ctx.syntax.f_left);
        return !ts_node_is_null(left) && ctx.Text(left) == text;
      }
      if (k == NodeKind::kExpressionStatement || k == NodeKind::kBlock || k == NodeKind::kModule) return false;
    }
    return false;
  }

  // `call`: a call of the API; otherwise a reference (`norm=nn.SyncBatchNorm`,
  // `self.clip = torch.nn.utils.clip_grad_norm`), reported with medium confidence: the use happens
  // later, through a value the analyser does not follow (third_party does not propagate it).
  void Classify(TSNode node, const std::vector<std::string>& names, RuleContext& ctx, bool report_unknown, bool call) {
    const Target& t = ctx.target;
    if (t.all_supported()) return;  // the cpu target: only CUDA-only code matters
    for (const auto& q : names) {
      if (const std::string* note = t.Unsupported(q)) {
        std::string tip =
            note->empty() ? "This API is not supported on " + t.name() + " (torch " + t.list_version() + ")." : *note;
        ctx.Report(node, q, tip, Category::kUnsupported, call ? Confidence::kHigh : Confidence::kMedium, name());
        return;
      }
      if (t.Supported(q)) return;
    }
    if (!report_unknown || IsCudaApi(t, names.front())) return;  // CUDA APIs: cuda_specific
    ctx.Report(node, names.front(),
               "Not in the " + t.name() + " support lists for torch " + t.list_version() +
                   "; check whether the target supports it.",
               Category::kUnknown, Confidence::kMedium, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeApiSupportRule() { return std::make_unique<ApiSupportRule>(); }

}  // namespace portkit::analyse
