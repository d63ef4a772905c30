// Rule: cuda_specific
// What it finds: CUDA-only code — torch.cuda.* and torch.backends.cudnn/cuda APIs, `.cuda()`
//   calls, CUDA device strings ("cuda", "cuda:1", also inside torch.device(...)), and the nccl
//   distributed backend (data/cuda/cuda_only.json).
// Why it matters: on npu these must be migrated (`portkit migrate` rewrites them: torch.cuda.X →
//   torch_npu.npu.X, "cuda" → "npu", nccl → hccl); for a CPU-only deployment they fail outright.
// Example: `torch.cuda.synchronize()`, `x.to("cuda:0")`, `init_process_group("nccl")`.
// Use instead: npu — the torch_npu equivalent named in Tips; cpu — guard with
//   torch.cuda.is_available() or remove.
#include <regex>

#include "analyse/rules/torch_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

class CudaSpecificRule : public Rule {
 public:
  std::string_view name() const override { return "cuda_specific"; }

  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    if (!ev.lookup.empty() && IsCudaApi(ctx.target, ev.lookup.front())) {
      // Probing for CUDA is how portable code stays portable; only the cpu target lets it be.
      const std::string& q = ev.lookup.front();
      if (ctx.target.all_supported() &&
          (q == "torch.cuda.is_available" || q == "torch.cuda.device_count")) return;
      ReportApi(ev.node, ev.lookup.front(), ctx);
      return;
    }
    if (ev.method.empty()) return;
    for (const auto& m : ctx.target.cuda().methods) {
      if (ev.method != m) continue;
      // A known non-torch receiver with its own method of that name is not CUDA code.
      if (ev.callee.kind == ValueKind::kUserFunction) return;
      std::string op = ev.lookup.empty() ? "." + m + "()" : ev.lookup.front();
      Report(ev.node, op, "CUDA-only call ." + m + "()", ".npu()", ctx);
      return;
    }
  }

  void OnAttribute(const AttributeEvent& ev, RuleContext& ctx) override {
    if (IsCudaApi(ctx.target, ev.qname)) ReportApi(ev.node, ev.qname, ctx);
  }

  void OnString(const StringEvent& ev, RuleContext& ctx) override {
    for (const auto& type : ctx.target.cuda().device_types) {
      const std::string& v = ev.value;
      if (v.compare(0, type.size(), type) != 0) continue;
      std::string_view rest(v.data() + type.size(), v.size() - type.size());
      bool device = rest.empty();
      if (!device && rest.front() == ':' && rest.size() > 1) {
        device = true;
        for (char c : rest.substr(1)) device &= c >= '0' && c <= '9';
      }
      if (device) {
        Report(ev.node, "device string " + v, "CUDA device string", "\"npu" + std::string(rest) + "\"", ctx);
        return;
      }
    }
    for (const auto& backend : ctx.target.cuda().distributed_backends) {
      if (ev.value == backend) {
        Report(ev.node, "backend " + backend, "CUDA-only distributed backend " + backend, "\"hccl\"", ctx);
        return;
      }
    }
  }

 private:
  void ReportApi(TSNode node, const std::string& qname, RuleContext& ctx) {
    const std::string* replacement = ctx.target.Rewrite(qname);
    std::string npu = replacement ? *replacement : "";
    if (npu.empty() && qname.rfind("torch.cuda.", 0) == 0) npu = "torch_npu.npu." + qname.substr(11);
    Report(node, qname, "CUDA-specific API " + qname, npu, ctx);
  }

  void Report(TSNode node, std::string op, const std::string& what, const std::string& npu,
              RuleContext& ctx) {
    const Target& t = ctx.target;
    if (t.all_supported()) {
      ctx.Report(node, std::move(op), what + ": not available in a CPU-only deployment.",
                 Category::kUnsupported, Confidence::kHigh, name());
    } else {
      std::string tip = what + ": migrate for " + t.name();
      if (!npu.empty()) tip += " (use " + npu + "; `portkit migrate` rewrites it)";
      ctx.Report(node, std::move(op), tip + ".", Category::kCuda, Confidence::kHigh, name());
    }
  }
};

}  // namespace

std::unique_ptr<Rule> MakeCudaSpecificRule() { return std::make_unique<CudaSpecificRule>(); }

}  // namespace portkit::analyse
