#include "analyse/value.h"

#include <array>
#include <cctype>

namespace portkit::analyse {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view LastComponent(std::string_view q) {
  size_t dot = q.rfind('.');
  return dot == std::string_view::npos ? q : q.substr(dot + 1);
}

std::string_view Namespace(std::string_view q) {
  size_t dot = q.rfind('.');
  return dot == std::string_view::npos ? std::string_view{} : q.substr(0, dot);
}

template <size_t N>
bool OneOf(std::string_view s, const std::array<std::string_view, N>& set) {
  for (auto v : set)
    if (v == s) return true;
  return false;
}

constexpr std::array<std::string_view, 10> kTensorAttrs = {"T",    "mT",   "H",    "mH",     "data",
                                                           "grad", "real", "imag", "weight", "bias"};
constexpr std::array<std::string_view, 28> kTensorNonTensorMethods = {"size",
                                                                      "dim",
                                                                      "item",
                                                                      "tolist",
                                                                      "numel",
                                                                      "nelement",
                                                                      "element_size",
                                                                      "data_ptr",
                                                                      "stride",
                                                                      "storage",
                                                                      "untyped_storage",
                                                                      "get_device",
                                                                      "numpy",
                                                                      "backward",
                                                                      "is_contiguous",
                                                                      "is_floating_point",
                                                                      "is_complex",
                                                                      "is_pinned",
                                                                      "is_shared",
                                                                      "is_set_to",
                                                                      "ndimension",
                                                                      "storage_offset",
                                                                      "register_hook",
                                                                      "equal",
                                                                      "__len__",
                                                                      "__iter__",
                                                                      "type",
                                                                      "has_names"};
constexpr std::array<std::string_view, 9> kSeqProducers = {"chunk",        "split",    "unbind",
                                                           "tensor_split", "meshgrid", "broadcast_tensors",
                                                           "std_mean",     "var_mean", "split_with_sizes"};
constexpr std::array<std::string_view, 7> kTensorNamespaces = {
    "torch", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special", "torch.nn.init", "torch.sparse"};
// Torch's own; a target's device method comes from ModuleResolver::IsModuleSelfMethod.
constexpr std::array<std::string_view, 13> kModuleSelfMethods = {
    "cuda",           "cpu",  "to",    "train",   "eval", "half", "float", "double", "bfloat16",
    "requires_grad_", "type", "apply", "to_empty"};

bool TorchFunctionReturnsNonTensor(std::string_view last) {
  if (StartsWith(last, "is_") || StartsWith(last, "set_") || StartsWith(last, "get_") ||
      StartsWith(last, "manual_seed") || StartsWith(last, "use_"))
    return true;
  static constexpr std::array<std::string_view, 12> kOthers = {"numel",   "save",         "load",           "compile",
                                                               "no_grad", "enable_grad",  "inference_mode", "device",
                                                               "seed",    "initial_seed", "autocast",       "typename"};
  return OneOf(last, kOthers);
}

}  // namespace

bool IsTorchClassName(std::string_view qname) {
  if (!StartsWith(qname, "torch.")) return false;
  std::string_view last = LastComponent(qname);
  return !last.empty() && std::isupper(static_cast<unsigned char>(last.front()));
}

bool IsAutogradFunction(const ClassInfo* cls) {
  if (!cls) return false;
  std::string_view base = cls->torch_base;
  return StartsWith(base, "torch.autograd.") && base.size() >= 8 && base.substr(base.size() - 8) == "Function";
}

Value AttributeOf(const Value& base, std::string_view attr, ModuleResolver* modules) {
  std::string a(attr);
  switch (base.kind) {
    case ValueKind::kExternal: return Value::External(base.name + "." + a);
    case ValueKind::kTensor:
      if (OneOf(attr, kTensorAttrs)) return Value::Tensor();
      if (attr == "shape" || attr == "dtype" || attr == "device" || attr == "ndim" || attr == "is_cuda" ||
          attr == "requires_grad")
        return Value::Other();
      return Value::Method("torch.Tensor." + a, "torch.Tensor");
    case ValueKind::kInstance:
      if (StartsWith(base.name, "torch.nn.") && (attr == "weight" || attr == "bias")) return Value::Tensor();
      return Value::Method(base.name + "." + a, base.name);
    case ValueKind::kUserModule: return modules ? modules->Export(base.name, a) : Value::Unknown();
    case ValueKind::kUserClass: {
      std::string method = FindMethod(base.cls, a);
      // `op = MyFunction.apply` of a torch.autograd.Function runs the class's forward.
      if (method.empty() && attr == "apply" && IsAutogradFunction(base.cls)) method = FindMethod(base.cls, "forward");
      return method.empty() ? Value::Unknown() : Value::UserFunction(method);
    }
    case ValueKind::kUserInstance: {
      const ClassInfo* c = base.cls;
      if (!c) return Value::Unknown();
      for (const ClassInfo* k = c; k; k = k->user_bases.empty() ? nullptr : k->user_bases.front())
        if (auto it = k->attrs.find(a); it != k->attrs.end()) return it->second;
      if (std::string method = FindMethod(c, a); !method.empty()) return Value::UserFunction(method);
      if (!c->torch_base.empty()) return Value::Method(c->torch_base + "." + a, c->torch_base, c);
      return Value::Unknown();
    }
    default: return Value::Unknown();
  }
}

std::string FindMethod(const ClassInfo* cls, std::string_view name) {
  // Depth-first through project bases; the depth bound also stops inheritance cycles.
  std::vector<std::pair<const ClassInfo*, int>> stack{{cls, 0}};
  while (!stack.empty()) {
    auto [c, depth] = stack.back();
    stack.pop_back();
    if (!c || depth > 16) continue;
    if (c->methods.count(std::string(name))) return c->QualifiedName() + "." + std::string(name);
    for (auto it = c->user_bases.rbegin(); it != c->user_bases.rend(); ++it) stack.push_back({*it, depth + 1});
  }
  return {};
}

std::string CalledFunction(const Value& callee) {
  switch (callee.kind) {
    case ValueKind::kUserFunction: return callee.name;
    case ValueKind::kUserClass: return FindMethod(callee.cls, "__init__");
    case ValueKind::kUserInstance:
      if (!callee.cls) return {};
      if (std::string f = FindMethod(callee.cls, "__call__"); !f.empty()) return f;
      return callee.cls->is_torch_module() ? FindMethod(callee.cls, "forward") : std::string();
    default: return {};
  }
}

Value CallResult(const Value& callee, const ModuleResolver* modules) {
  switch (callee.kind) {
    case ValueKind::kExternal: {
      const std::string& q = callee.name;
      if (!StartsWith(q, "torch.")) return Value::Unknown();
      std::string_view last = LastComponent(q);
      if (IsTorchClassName(q)) {
        if (q == "torch.nn.Parameter" || q == "torch.nn.parameter.Parameter" || q == "torch.Tensor" ||
            (last.size() > 6 && last.substr(last.size() - 6) == "Tensor"))
          return Value::Tensor();
        return Value::Instance(q);
      }
      if (!OneOf(Namespace(q), kTensorNamespaces)) return Value::Unknown();
      if (OneOf(last, kSeqProducers)) return Value::TensorSeq();
      if (TorchFunctionReturnsNonTensor(last)) return Value::Other();
      return Value::Tensor();
    }
    case ValueKind::kMethod: {
      std::string_view m = LastComponent(callee.name);
      if (callee.owner == "torch.Tensor") {
        if (OneOf(m, kSeqProducers)) return Value::TensorSeq();
        if (OneOf(m, kTensorNonTensorMethods) || StartsWith(m, "is_")) return Value::Other();
        return Value::Tensor();
      }
      if (StartsWith(callee.owner, "torch.nn.")) {
        if (OneOf(m, kModuleSelfMethods) || (modules && modules->IsModuleSelfMethod(m)))
          return callee.cls ? Value::UserInstance(callee.cls) : Value::Instance(callee.owner);
        if (m == "forward") return Value::Tensor();
      }
      return Value::Unknown();
    }
    case ValueKind::kInstance: return StartsWith(callee.name, "torch.nn.") ? Value::Tensor() : Value::Unknown();
    case ValueKind::kUserClass: return Value::UserInstance(callee.cls);
    case ValueKind::kUserInstance:
      return callee.cls && callee.cls->is_torch_module() ? Value::Tensor() : Value::Unknown();
    default: return Value::Unknown();
  }
}

namespace {

// torch.nn re-exports its module classes: torch.nn.modules.loss.L1Loss is torch.nn.L1Loss, the
// name the support lists use. Returns the public spelling, or empty.
std::string PublicNnName(std::string_view q) {
  constexpr std::string_view kModules = "torch.nn.modules.";
  if (!StartsWith(q, kModules)) return {};
  std::string_view rest = q.substr(kModules.size());  // "loss.L1Loss[.method]"
  size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return {};
  std::string_view cls = rest.substr(dot + 1);
  if (cls.empty() || !(cls.front() >= 'A' && cls.front() <= 'Z')) return {};
  return "torch.nn." + std::string(cls);
}

}  // namespace

std::vector<std::string> LookupNames(const Value& callee) {
  std::vector<std::string> names;
  if (callee.kind == ValueKind::kExternal || callee.kind == ValueKind::kInstance) {
    names.push_back(callee.name);
    if (std::string alias = PublicNnName(callee.name); !alias.empty()) names.push_back(std::move(alias));
  } else if (callee.kind == ValueKind::kMethod) {
    names.push_back(callee.name);
    if (std::string alias = PublicNnName(callee.name); !alias.empty()) names.push_back(std::move(alias));
    std::string method(LastComponent(callee.name));
    const std::string& owner = callee.owner;
    if (StartsWith(owner, "torch.nn.") && owner != "torch.nn.Module") names.push_back("torch.nn.Module." + method);
    else if (StartsWith(owner, "torch.optim.lr_scheduler.") && owner != "torch.optim.lr_scheduler.LRScheduler")
      names.push_back("torch.optim.lr_scheduler.LRScheduler." + method);
    else if (StartsWith(owner, "torch.optim.") && owner != "torch.optim.Optimizer")
      names.push_back("torch.optim.Optimizer." + method);
  }
  return names;
}

}  // namespace portkit::analyse
