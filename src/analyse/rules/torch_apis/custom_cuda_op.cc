// Rule: custom_cuda_op
// What it finds: Python call sites of custom CUDA operators registered in the project's C++/CUDA
//   sources (PYBIND11_MODULE m.def, TORCH_LIBRARY m.def/m.impl), matched by name (the last
//   component of a name resolved outside the project: `from pkg import _C; _C.op(...)`) and by
//   arguments: all of them count, keywords too, between the op's required and total parameters
//   (`py::arg("x") = 1` defaults), keyword names checked where registered, `*args`/`**kwargs`
//   only where they can fit (`model.forward(**kw)` does not call a positional-only `forward`;
//   `super().forward(...)` never does); ops with CPU kernels only are not CUDA operators. Also
//   builds of CUDA extensions through torch.utils.cpp_extension (CUDAExtension, load,
//   load_inline).
// Why it matters: a user-defined CUDA operator has no implementation on the target; it must be
//   re-implemented (e.g. as an Ascend C operator) or replaced by torch ops.
// Example: `_ext.nms_cuda(boxes, scores, 0.5)` with `m.def("nms_cuda", &nms_cuda)` in bindings.cpp.
// Use instead: a torch implementation or a target-native custom op.
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
      if (fn == "CUDAExtension" || fn == "load" || fn == "load_inline") {
        ctx.Report(ev.node, *q, "Builds a CUDA extension: its operators are user-defined CUDA operators.",
                   Category::kCuda, Confidence::kHigh, name());
        ctx.Report(ev.node, *q, kTip, Category::kUnsupported, Confidence::kHigh, name());
      }
      return;
    }
    std::string_view called;
    if (q && q->rfind("torch.ops.", 0) == 0) {
      called = std::string_view(*q).substr(q->rfind('.') + 1);
    } else if (ev.callee.kind == ValueKind::kExternal && q && q->rfind("torch", 0) != 0) {
      // A name resolved outside the project, matched by its last component as the reference
      // tool matches qualified names by suffix: `from pkg import _C; _C.op(...)`,
      // `import pkg._C as C2; C2.op(...)`, `from pkg._C import op; op(...)`.
      called = std::string_view(*q).substr(q->rfind('.') + 1);
    } else if (!ev.method.empty()) {
      // Known torch receivers, project functions and base-class methods are not extension calls.
      if (q || ev.callee.kind == ValueKind::kUserFunction || ev.super_receiver) return;
      called = ev.method;
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
    const CustomOp* op = ctx.custom_ops.Match(called, shape);
    if (!op) return;
    std::string where = op->file + ":" + std::to_string(op->line);
    ctx.Report(ev.node, std::string(called), std::string(kTip) + " Registered in " + where + " (" + op->how + ").",
               Category::kUnsupported, op->arg_count < 0 ? Confidence::kMedium : Confidence::kHigh, name());
  }
};

}  // namespace

std::unique_ptr<Rule> MakeCustomCudaOpRule() { return std::make_unique<CustomCudaOpRule>(); }

}  // namespace portkit::analyse
