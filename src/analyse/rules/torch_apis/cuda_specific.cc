// Rule: cuda_specific
// What it finds: CUDA-only code (data/cuda/cuda_only.json) — torch.cuda.* and
//   torch.backends.cudnn/cuda APIs, called, referenced, assigned
//   (`torch.backends.cudnn.benchmark = True`) or imported (`from torch.cuda.amp import autocast`,
//   `from torch.utils.cpp_extension import CUDA_HOME`: the import line itself); `.cuda()` calls and `.is_cuda` reads;
//   CUDA device strings ("cuda", "cuda:1", "cuda:{}".format(i), f"cuda:{k}", "cuda:" + str(i), also inside
//   torch.device(...)); distributed backend names in any case ("nccl", "NCCL"); environment
//   variables only CUDA reads (`os.environ["CUDA_VISIBLE_DEVICES"]`, any upper-case `NCCL_*`,
//   `CUDA_*`, `CUDNN_*` name); CUDA extension build helpers (`CUDA_HOME`) and compiler settings
//   (`extra_compile_args["nvcc"]`); keyword arguments that configure CUDA-only machinery
//   (`dict(cudnn_benchmark=False)`); `torch.version.cuda`, `torch.get_autocast_gpu_dtype()`,
//   `storage._share_cuda_()`; and ops of libraries backed by CUDA kernels (`torchvision.ops.nms`,
//   `roi_align`, `deform_conv2d`, ...), with the target's replacement where its target.json
//   names one (`library_ops`; not on a CPU-only target, "kind": "cpu", where they run on the CPU).
// Why it matters: on an accelerator target these must be migrated (`portkit migrate` rewrites
//   them by the target's target.json: rewrites.tsv and device_module for APIs, device_type for
//   device strings, renames for methods, attributes, backends and env vars); for a CPU-only
//   deployment they fail.
// Example: `torch.cuda.synchronize()`, `x.to("cuda:0")`, `init_process_group("nccl")`.
// Use instead: the target's equivalent named in Tips; cpu — guard with
//   torch.cuda.is_available() or remove.
#include <algorithm>
#include <cctype>

#include "analyse/rules/torch_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

class CudaSpecificRule : public Rule {
 public:
  std::string_view name() const override { return "cuda_specific"; }

  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    ReportCudaKeywords(ev, ctx);
    if (!ev.lookup.empty() && ev.lookup.front().rfind("torch.utils.cpp_extension.", 0) == 0)
      return;  // extension builds: custom_cuda_op
    if (!ev.lookup.empty() && ReportLibraryOp(ev.node, ev.lookup.front(), ctx)) return;
    if (!ev.lookup.empty() && IsCudaApi(ctx.target, ev.lookup.front())) {
      // Probing for CUDA is how portable code stays portable; only the cpu target lets it be.
      const std::string& q = ev.lookup.front();
      if (ctx.target.cpu_only() && (q == "torch.cuda.is_available" || q == "torch.cuda.device_count")) return;
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
    if (!ev.qname.empty()) {
      if (IsCudaApi(ctx.target, ev.qname)) {
        ReportApi(ev.node, ev.qname, ctx);
        return;
      }
      if (!ev.type_test && ReportLibraryOp(ev.node, ev.qname, ctx)) return;
    }
    if (ev.attr.empty()) return;
    for (const auto& a : ctx.target.cuda().attributes) {
      if (ev.attr != a) continue;
      const std::string* renamed = Find(ctx.target.facts().renames.attributes, a);
      Report(ev.node, "." + a, "CUDA-only attribute ." + a, renamed ? "." + *renamed : "", ctx);
      return;
    }
  }

  // `from torch.cuda.amp import autocast`, `import torch.cuda.nvtx as nvtx` (the statement: the
  // module is CUDA-only), `from torch.utils.cpp_extension import CUDA_HOME` (the name).
  void OnImport(const AttributeEvent& ev, RuleContext& ctx) override {
    if (!IsCudaApi(ctx.target, ev.qname)) return;
    // A name imported from a CUDA-only module: the statement is reported already.
    if (ctx.syntax.Kind(ev.node) != NodeKind::kImportStatement &&
        ctx.syntax.Kind(ev.node) != NodeKind::kImportFromStatement) {
      size_t dot = ev.qname.rfind('.');
      if (dot != std::string::npos && IsCudaApi(ctx.target, ev.qname.substr(0, dot))) return;
    }
    const std::string& device_module = ctx.target.facts().device_module;
    std::string use;
    if (const std::string* replacement = ctx.target.Rewrite(ev.qname)) use = *replacement;
    else if (!device_module.empty() && ev.qname.rfind("torch.cuda.", 0) == 0)
      use = device_module + "." + ev.qname.substr(11);
    else if (!device_module.empty() && ev.qname == "torch.cuda") use = device_module;
    Report(ev.node, ev.qname, "Imports CUDA-specific " + ev.qname, use, ctx, false);
  }

  void OnString(const StringEvent& ev, RuleContext& ctx) override {
    for (const auto& type : ctx.target.cuda().device_types) {
      const std::string& v = ev.value;
      if (v.compare(0, type.size(), type) != 0) continue;
      std::string_view rest(v.data() + type.size(), v.size() - type.size());
      if (IsDeviceSuffix(rest)) {
        const std::string& device_type = ctx.target.facts().device_type;
        // migrate rewrites literal devices ("cuda", "cuda:1"), not format templates.
        bool literal =
            !ev.formatted && (rest.empty() || (rest.size() > 1 && std::isdigit(static_cast<unsigned char>(rest[1]))));
        Report(ev.node, "device string " + v, "CUDA device string",
               device_type.empty() ? "" : "\"" + device_type + std::string(rest) + "\"", ctx, literal);
        return;
      }
    }
    if (ev.formatted) return;
    for (const auto& backend : ctx.target.cuda().distributed_backends) {
      if (EqualsIgnoringCase(ev.value, backend)) {
        const std::string* renamed = Find(ctx.target.facts().renames.distributed_backends, backend);
        Report(ev.node, "backend " + backend, "CUDA-only distributed backend " + backend,
               renamed ? "\"" + *renamed + "\"" : "", ctx);
        return;
      }
    }
    const auto& renamed_vars = ctx.target.facts().renames.env_vars;
    const auto& env_vars = ctx.target.cuda().env_vars;
    const std::string* renamed = Find(renamed_vars, ev.value);
    if (renamed || std::find(env_vars.begin(), env_vars.end(), ev.value) != env_vars.end() ||
        IsCudaEnvName(ctx.target, ev.value)) {
      Report(ev.node, "env " + ev.value, "CUDA environment variable " + ev.value, renamed ? *renamed : "", ctx);
      return;
    }
    const auto& build = ctx.target.cuda().build_strings;
    if (!ctx.target.cpu_only() && std::find(build.begin(), build.end(), ev.value) != build.end())
      Report(ev.node, "build " + ev.value, "CUDA compiler setting \"" + ev.value + "\"", "", ctx, false);
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

  // After the device type: nothing, ":N", ":" (followed by `+ str(i)`), or ":" and a format
  // placeholder ("{}", "{0}", "{rank}", "%d", "%s").
  static bool IsDeviceSuffix(std::string_view rest) {
    if (rest.empty()) return true;
    if (rest.front() != ':') return false;
    rest.remove_prefix(1);
    if (rest.empty()) return true;
    if (rest == "%d" || rest == "%s" || rest == "%i") return true;
    if (rest.front() == '{') return rest.back() == '}' && rest.find('{', 1) == std::string_view::npos;
    for (char c : rest)
      if (c < '0' || c > '9') return false;
    return true;
  }

  // An upper-case environment-variable-like name under a CUDA prefix (NCCL_ASYNC_ERROR_HANDLING).
  static bool IsCudaEnvName(const Target& t, const std::string& v) {
    for (const auto& prefix : t.cuda().env_var_prefixes) {
      if (v.size() <= prefix.size() || v.compare(0, prefix.size(), prefix) != 0) continue;
      return std::all_of(v.begin(), v.end(),
                         [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; });
    }
    return false;
  }

  // `dict(cudnn_benchmark=False)`, `nccl_timeout=...`: keyword names with a CUDA-only token.
  void ReportCudaKeywords(const CallEvent& ev, RuleContext& ctx) {
    const auto& tokens = ctx.target.cuda().keyword_tokens;
    if (tokens.empty() || ctx.target.cpu_only()) return;  // harmless on a CPU deployment
    for (const auto& a : ev.args) {
      if (a.keyword.empty()) continue;
      std::string_view kw = a.keyword;
      bool hit = false;
      for (size_t b = 0; b <= kw.size() && !hit;) {
        size_t e = kw.find('_', b);
        if (e == std::string_view::npos) e = kw.size();
        std::string_view token = kw.substr(b, e - b);
        for (const auto& t : tokens) hit |= EqualsIgnoringCase(token, t);
        b = e + 1;
      }
      if (!hit) continue;
      TSNode kw_node = ts_node_parent(a.value);
      Report(ts_node_is_null(kw_node) ? a.value : kw_node, "keyword " + std::string(kw),
             "CUDA-only setting " + std::string(kw) + "=", "", ctx, false);
    }
  }

  static bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
        return false;
    return true;
  }

  // A CUDA-backed library op: reported as CUDA code with the target's replacement, if any.
  bool ReportLibraryOp(TSNode node, const std::string& qname, RuleContext& ctx) {
    const Target& t = ctx.target;
    const std::string* op = LibraryOp(t, qname);
    if (!op) return false;
    if (t.cpu_only()) return true;  // library ops have CPU kernels
    const std::string* use = Find(t.facts().library_ops, *op);
    std::string tip = "Runs a CUDA kernel of its library: " + qname + " has no " + t.name() + " kernel";
    tip += use ? " unless you add " + *use + "." : " that portkit knows of; run it on the CPU or re-implement it.";
    ctx.Report(node, qname, std::move(tip), Category::kCuda, Confidence::kHigh, name());
    return true;
  }

  static const std::string* Find(const std::map<std::string, std::string>& renames, const std::string& key) {
    auto it = renames.find(key);
    return it == renames.end() ? nullptr : &it->second;
  }

  // `use`: the target's replacement, empty when the target names none.
  void Report(TSNode node, std::string op, const std::string& what, const std::string& use, RuleContext& ctx,
              bool migrated = true) {
    const Target& t = ctx.target;
    if (t.cpu_only()) {
      ctx.Report(node, std::move(op), what + ": not available in a CPU-only deployment.", Category::kUnsupported,
                 Confidence::kHigh, name());
    } else {
      std::string tip = what + ": migrate for " + t.name();
      if (!use.empty()) tip += " (use " + use + (migrated ? "; `portkit migrate` rewrites it)" : ")");
      ctx.Report(node, std::move(op), tip + ".", Category::kCuda, Confidence::kHigh, name());
    }
  }
};

}  // namespace

std::unique_ptr<Rule> MakeCudaSpecificRule() { return std::make_unique<CudaSpecificRule>(); }

}  // namespace portkit::analyse
