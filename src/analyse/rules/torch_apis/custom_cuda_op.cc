// Rule: custom_cuda_op
// What it finds: Python call sites of custom CUDA operators registered in the project's C++/CUDA
//   sources (PYBIND11_MODULE m.def, TORCH_LIBRARY m.def/m.impl), matched by name (the last
//   component of a name resolved outside the project: `from pkg import _C; _C.op(...)`) and by
//   arguments: all of them count, keywords too, between the op's required and total parameters
//   (`py::arg("x") = 1` defaults), keyword names checked where registered, `*args`/`**kwargs`
//   only where they can fit (`model.forward(**kw)` does not call a positional-only `forward`;
//   `super().forward(...)` never does). Every extension module's registration is its own op:
//   `xentropy_cuda.forward(...)` is matched against the `forward` of the module built as
//   `xentropy_cuda` (the build script's `CUDAExtension(name=...)` or `PYBIND11_MODULE(name, m)`),
//   not against another module's `forward`. On a receiver of unknown type, a method that a
//   project Python class defines and that takes the call, a torch tensor method
//   (`t.flatten(2)`), or a method of a container item (`ts[0].op()`) is not the op, unless the
//   receiver is spelled as the extension module's name (`fused_layer_norm_cuda.forward(...)`
//   with the module bound by `importlib.import_module` elsewhere). Ops with CPU kernels only are not CUDA operators:
//   built by `CppExtension`, registered under CPU dispatch keys only, or bound in a file that mentions no CUDA with
//   functions defined in sources that mention none (DeepSpeed's `cpu_adam`, libaio bindings), even in a project that
//   has `.cu` files. Also builds of CUDA extensions through torch.utils.cpp_extension (CUDAExtension, load,
//   load_inline).
// Why it matters: a user-defined CUDA operator has no implementation on the target; it must be
//   re-implemented (e.g. as an Ascend C operator) or replaced by torch ops.
// Example: `_ext.nms_cuda(boxes, scores, 0.5)` with `m.def("nms_cuda", &nms_cuda)` in bindings.cpp.
// Use instead: a torch implementation or a target-native custom op.
#include <algorithm>

#include "analyse/custom_ops.h"
#include "analyse/rules/torch_apis/rules.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

constexpr const char* kTip = "User-defined CUDA Operator.";

class CustomCudaOpRule : public Rule {
 public:
  std::string_view name() const override { return "custom_cuda_op"; }

  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    const std::string* q = ev.lookup.empty() ? nullptr : &ev.lookup.front();
    if (q && q->rfind("torch.utils.cpp_extension.", 0) == 0) {
      std::string fn = q->substr(26);
      // load_inline without cuda_sources compiles C++ only: a CPU extension.
      bool cpu_inline = fn == "load_inline" && std::none_of(ev.args.begin(), ev.args.end(),
                                                            [](const auto& a) { return a.keyword == "cuda_sources"; });
      if (fn == "CUDAExtension" || fn == "load" || (fn == "load_inline" && !cpu_inline)) {
        ctx.Report(ev.node, *q, "Builds a CUDA extension: its operators are user-defined CUDA operators.",
                   Category::kCuda, Confidence::kHigh, name());
        ctx.Report(ev.node, *q, kTip, Category::kUnsupported, Confidence::kHigh, name());
      }
      return;
    }
    std::string_view called, receiver_module;
    bool unknown_receiver = false;
    if (q && q->rfind("torch.ops.", 0) == 0) {
      called = std::string_view(*q).substr(q->rfind('.') + 1);
    } else if (ev.callee.kind == ValueKind::kExternal && q && q->rfind("torch", 0) != 0) {
      // A name resolved outside the project, matched by its last component as the reference
      // tool matches qualified names by suffix: `from pkg import _C; _C.op(...)`,
      // `import pkg._C as C2; C2.op(...)`, `from pkg._C import op; op(...)`. The component
      // before it names the module, which picks among registrations of the same name.
      std::string_view qv(*q);
      size_t dot = qv.rfind('.');
      called = qv.substr(dot + 1);
      if (dot != std::string_view::npos) {
        std::string_view mod = qv.substr(0, dot);
        receiver_module = mod.substr(mod.rfind('.') + 1);
      }
    } else if (!ev.method.empty()) {
      // Known torch receivers, project functions, project objects (`self.x` bound to a project
      // class) and base-class methods are not extension calls.
      if (q || ev.callee.kind == ValueKind::kUserFunction || ev.super_receiver || !ev.receiver_unknown) return;
      called = ev.method;
      unknown_receiver = true;
    } else if (ev.callee.is_unknown()) {
      called = ctx.Text(ts_node_child_by_field_id(ev.node, ctx.syntax.f_function));
    } else {
      return;
    }
    if (called.empty()) return;
    CallShape shape;
    for (const auto& a : ev.args) {
      if (a.splat) {
        (ctx.Text(a.value).rfind("**", 0) == 0 ? shape.double_star : shape.star) = true;
      } else if (!a.keyword.empty()) {
        shape.keywords.push_back(a.keyword);
      } else {
        ++shape.positional;
      }
    }
    const CustomOp* op = nullptr;
    if (unknown_receiver) {
      // A receiver spelled as an extension module's name (`fused_layer_norm_cuda.forward(...)`
      // with `fused_layer_norm_cuda = importlib.import_module(...)` set in another function).
      TSNode obj =
          ts_node_child_by_field_id(ts_node_child_by_field_id(ev.node, ctx.syntax.f_function), ctx.syntax.f_object);
      // An item of a container (`ts[0].flatten(2)`) is no extension module.
      if (ctx.syntax.Kind(obj) == NodeKind::kSubscript) return;
      if (ctx.syntax.Kind(obj) == NodeKind::kAttribute) obj = ts_node_child_by_field_id(obj, ctx.syntax.f_attribute);
      if (ctx.syntax.Kind(obj) == NodeKind::kIdentifier)
        op = ctx.custom_ops.MatchInModule(called, shape, ctx.Text(obj));
    }
    bool by_module = op != nullptr;
    if (!op) op = ctx.custom_ops.Match(called, shape, receiver_module);
    if (!op) return;
    if (unknown_receiver && !by_module) {
      // `obj.m(...)` on an object of unknown type: not the op when a method of the project's
      // Python classes takes the call (`self.head.forward(x, y)`, `cdb.get_rank(group)`), nor
      // when torch tensors have that method and the op is not known to exist under it
      // (`t[i].flatten(2)` is Tensor.flatten).
      if (ctx.custom_ops.PythonMethodFits(called, shape)) return;
      std::string m(called);
      const std::string* owners = ctx.target.TorchOnlyMethod(m);
      if ((owners && owners->find("tensor") != std::string::npos) || ctx.target.KnownInAnyVersion("torch.Tensor." + m))
        return;
    }
    std::string where = op->file + ":" + std::to_string(op->line);
    ctx.Report(ev.node, std::string(called), std::string(kTip) + " Registered in " + where + " (" + op->how + ").",
               Category::kUnsupported, op->arg_count < 0 ? Confidence::kMedium : Confidence::kHigh, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeCustomCudaOpRule() { return std::make_unique<CustomCudaOpRule>(); }

}  // namespace portkit::analyse
