#pragma once
/// What the analyser knows about a Python expression: the abstract value it evaluates to.
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace portkit::analyse {

struct ClassInfo;

enum class ValueKind : uint8_t {
  kUnknown,       ///< nothing known (a parameter, a value from an unknown library)
  kOther,         ///< known not to be torch: a literal, a local bound to a non-torch value
  kExternal,      ///< a name from outside the project: module, function or class; `name` = qualified
  kTensor,        ///< a torch.Tensor
  kTensorSeq,     ///< a tuple/list of tensors (chunk, split, ...)
  kInstance,      ///< an instance of the external class `name` (torch.nn.Linear, torch.optim.Adam)
  kMethod,        ///< a bound method: `name` = qualified method, `owner` = receiver's class
  kUserModule,    ///< a module or package of the analysed project; `name` = module name
  kUserClass,     ///< a class defined in the project (`cls`)
  kUserInstance,  ///< an instance of a project class (`cls`)
  kUserFunction,  ///< a function defined in the project
};

struct Value {
  ValueKind kind = ValueKind::kUnknown;
  std::string name;
  std::string owner;
  const ClassInfo* cls = nullptr;

  static Value Unknown() { return {}; }
  static Value Other() { return {ValueKind::kOther, {}, {}, nullptr}; }
  static Value Tensor() { return {ValueKind::kTensor, {}, {}, nullptr}; }
  static Value TensorSeq() { return {ValueKind::kTensorSeq, {}, {}, nullptr}; }
  static Value External(std::string q) { return {ValueKind::kExternal, std::move(q), {}, nullptr}; }
  static Value Instance(std::string q) { return {ValueKind::kInstance, std::move(q), {}, nullptr}; }
  static Value Method(std::string q, std::string owner, const ClassInfo* c = nullptr) {
    return {ValueKind::kMethod, std::move(q), std::move(owner), c};
  }
  static Value UserModule(std::string m) { return {ValueKind::kUserModule, std::move(m), {}, nullptr}; }
  static Value UserClass(const ClassInfo* c) { return {ValueKind::kUserClass, {}, {}, c}; }
  static Value UserInstance(const ClassInfo* c) { return {ValueKind::kUserInstance, {}, {}, c}; }
  static Value UserFunction(std::string q) { return {ValueKind::kUserFunction, std::move(q), {}, nullptr}; }

  bool is_unknown() const { return kind == ValueKind::kUnknown; }
};

/// `self.X = <expr>` seen in a class's methods, kept as text to resolve in the module's scope.
struct AttrExpr {
  enum class Kind : uint8_t { kCall, kDotted, kTensor } kind;
  std::string dotted;  ///< callee (kCall) or expression (kDotted)
};

/// A class defined in the analysed project.
struct ClassInfo {
  std::string module;  ///< defining module ("pkg.models")
  std::string name;
  std::vector<std::string> base_exprs;  ///< dotted text of each base class
  std::unordered_set<std::string> methods;
  /// Arguments a call of each method takes besides self (min, max; max = INT32_MAX with *args);
  /// @staticmethod counts every parameter.
  std::unordered_map<std::string, std::pair<int, int>> method_arity;
  std::vector<std::pair<std::string, AttrExpr>> attr_exprs;

  // Filled by resolution (ProjectIndex for top-level classes, the walker for local ones).
  bool resolved = false;
  /// The first torch class among the bases, transitively ("torch.nn.Module"), or empty.
  std::string torch_base;
  std::unordered_map<std::string, Value> attrs;
  /// Project classes among the bases, in order (for method lookup through inheritance).
  std::vector<const ClassInfo*> user_bases;
  /// Qualified name ("pkg.mod.Class"; nested classes carry their enclosing function's name).
  std::string qualname;

  const std::string& QualifiedName() const { return qualname; }

  bool is_torch_module() const { return torch_base.rfind("torch.nn.", 0) == 0; }
};

/// Answers questions about project modules; implemented by ProjectIndex.
class ModuleResolver {
 public:
  virtual ~ModuleResolver() = default;
  /// The value of top-level name `name` of project module `module` (a submodule counts), or
  /// Unknown.
  virtual Value Export(const std::string& module, const std::string& name) = 0;
  /// Whether `module` is a module or package of the project (or an -env root).
  virtual bool IsProjectModule(const std::string& module) const = 0;
  /// Whether `method` of a torch.nn.Module returns the module besides torch's own (cuda, cpu,
  /// to, ...): the target's device method (its target.json renames.methods, `model.npu()`).
  virtual bool IsModuleSelfMethod(std::string_view /*method*/) const { return false; }
};

/// Value semantics shared by the summary resolver and the walker.
Value AttributeOf(const Value& base, std::string_view attr, ModuleResolver* modules);
/// The value a call of `callee` returns; `modules` (may be null) adds the target's module methods.
Value CallResult(const Value& callee, const ModuleResolver* modules = nullptr);
/// The qualified names under which a call of `callee` is looked up in support tables, most
/// specific first (e.g. torch.nn.Linear.cuda, then torch.nn.Module.cuda). Empty when the callee is
/// not an external API.
std::vector<std::string> LookupNames(const Value& callee);
/// Whether a project class derives from torch.autograd.Function (its `apply` runs `forward`).
bool IsAutogradFunction(const ClassInfo* cls);
/// Class qualified name → the torch base class it implies ("torch.nn.Conv2d" → itself).
bool IsTorchClassName(std::string_view qname);
/// The qualified name of method `name` as `cls` resolves it: defined in the class or inherited from
/// a project base class (depth-first, as Python's MRO for single inheritance); empty if none.
std::string FindMethod(const ClassInfo* cls, std::string_view name);
/// The project function a call of `callee` runs: a function, a class's __init__, an instance's
/// forward/__call__; empty when the callee is not project code.
std::string CalledFunction(const Value& callee);

}  // namespace portkit::analyse
