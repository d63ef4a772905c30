// Rule: cuda_specific
// What it finds: CUDA-only code — torch.cuda.* and torch.backends.cudnn/cuda APIs, `.cuda()`
//   calls, CUDA device strings ("cuda", "cuda:1", also inside torch.device(...)), and the nccl
//   distributed backend (data/cuda/cuda_only.json).
// Why it matters: on an accelerator target these must be migrated (`portkit migrate` rewrites
//   them by the target's target.json: rewrites.tsv and device_module for APIs, device_type for
//   device strings, renames for methods and backends); for a CPU-only deployment they fail.
// Example: `torch.cuda.synchronize()`, `x.to("cuda:0")`, `init_process_group("nccl")`.
// Use instead: the target's equivalent named in Tips; cpu — guard with
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
      const std::string* renamed = Find(ctx.target.facts().renames.methods, m);
      Report(ev.node, op, "CUDA-only call ." + m + "()", renamed ? "." + *renamed + "()" : "", ctx);
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
        const std::string& device_type = ctx.target.facts().device_type;
        Report(ev.node, "device string " + v, "CUDA device string",
               device_type.empty() ? "" : "\"" + device_type + std::string(rest) + "\"", ctx);
        return;
      }
    }
    for (const auto& backend : ctx.target.cuda().distributed_backends) {
      if (ev.value == backend) {
        const std::string* renamed = Find(ctx.target.facts().renames.distributed_backends, backend);
        Report(ev.node, "backend " + backend, "CUDA-only distributed backend " + backend,
               renamed ? "\"" + *renamed + "\"" : "", ctx);
        return;
      }
    }
  }

 private:
  void ReportApi(TSNode node, const std::string& qname, RuleContext& ctx) {
    const std::string* replacement = ctx.target.Rewrite(qname);
    std::string use = replacement ? *replacement : "";
    const std::string& device_module = ctx.target.facts().device_module;
    if (use.empty() && !device_module.empty() && qname.rfind("torch.cuda.", 0) == 0)
      use = device_module + "." + qname.substr(11);
    Report(node, qname, "CUDA-specific API " + qname, use, ctx);
  }

  static const std::string* Find(const std::map<std::string, std::string>& renames, const std::string& key) {
    auto it = renames.find(key);
    return it == renames.end() ? nullptr : &it->second;
  }

  // `use`: the target's replacement, empty when the target names none.
  void Report(TSNode node, std::string op, const std::string& what, const std::string& use,
              RuleContext& ctx) {
    const Target& t = ctx.target;
    if (t.all_supported()) {
      ctx.Report(node, std::move(op), what + ": not available in a CPU-only deployment.",
                 Category::kUnsupported, Confidence::kHigh, name());
    } else {
      std::string tip = what + ": migrate for " + t.name();
      if (!use.empty()) tip += " (use " + use + "; `portkit migrate` rewrites it)";
      ctx.Report(node, std::move(op), tip + ".", Category::kCuda, Confidence::kHigh, name());
    }
  }
};

}  // namespace

std::unique_ptr<Rule> MakeCudaSpecificRule() { return std::make_unique<CudaSpecificRule>(); }

}  // namespace portkit::analyse
