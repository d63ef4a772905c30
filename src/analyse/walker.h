#pragma once
/// Pass 2: walks one module in Python's scoping order (module body first, function bodies after,
/// with the enclosing scopes as they stand at the end), tracks what each name is bound to, types
/// receivers, and hands call, attribute and string events to the rules.
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analyse/module_summary.h"
#include "analyse/project_index.h"
#include "analyse/rule.h"

namespace portkit::analyse {

/// Receives the walker's events.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void OnCall(const CallEvent&) = 0;
  virtual void OnAttribute(const AttributeEvent&) = 0;
  virtual void OnString(const StringEvent&) = 0;
  /// References the analyser's rules look at besides OnAttribute's (attribute stores, members of
  /// non-external values, external names used as values) and formatted strings; sinks that
  /// rewrite code (migrate) keep to OnAttribute/OnString.
  virtual void OnReference(const AttributeEvent&) {}
  virtual void OnFormattedString(const StringEvent&) {}
  /// An absolute import: `node` is the statement (`import torch.cuda.nvtx as nvtx`, `from
  /// torch.cuda.amp import autocast`) or, for a from-import, one imported name; `qname` the module
  /// imported or `module.name`. Only for rules that report import lines (CUDA-only modules).
  virtual void OnImport(const AttributeEvent&) {}
  /// A `for` statement; `iterable` is its iterable once enumerate()/tqdm()/iter()/zip() wrappers
  /// are peeled off, and `iterable_value` what that evaluates to.
  virtual void OnFor(TSNode /*for_node*/, TSNode /*iterable*/, const Value& /*iterable_value*/) {}
  /// The code that follows belongs to function `qualname` (defined at `def_node`), or to the
  /// module's top level when `qualname` is empty.
  virtual void OnFunction(const std::string& /*qualname*/, TSNode /*def_node*/) {}
  /// `target[index] = value` (an item assignment).
  virtual void OnSubscriptAssign(TSNode /*assignment*/, TSNode /*target*/, const Value& /*base*/,
                                 const Value& /*index*/) {}
};

class FileWalker {
 public:
  /// `known_external(q)` tells whether a qualified name exists (for `from torch import *`).
  FileWalker(const PySyntax& syn, const ParsedSource& src, const ModuleSummary& summary, ProjectIndex& index,
             std::function<bool(const std::string&)> known_external, EventSink& sink);
  ~FileWalker();
  void Run();

 private:
  struct Scope;
  struct Deferred {
    TSNode def;
    Scope* parent;
    const ClassInfo* cls;
    std::string qualname;
  };
  enum class Use : uint8_t { kValue, kCallee, kObject, kStore };

  Value Eval(TSNode n, Use use = Use::kValue);
  Value EvalCall(TSNode n);
  Value EvalAttribute(TSNode n, Use use);
  Value EvalAssignment(TSNode n);
  Value EvalAugmentedAssignment(TSNode n);
  Value EvalSubscript(TSNode n);
  /// Binary and comparison operators: a tensor when an operand is one.
  Value EvalOperator(TSNode n);
  Value EvalConditional(TSNode n);
  /// A string literal (OnString) or an f-string (OnFormattedString, its interpolations visited).
  Value EvalString(TSNode n);
  /// A dict, list, set or tuple literal (a dict's keys are type tests).
  Value EvalContainer(TSNode n);
  void Exec(TSNode n);
  void ExecChildren(TSNode n);
  void ExecDecorated(TSNode n);
  void ExecFor(TSNode n);
  /// A block or module (statements), or a compound statement (clauses and expressions).
  void ExecCompound(TSNode n);
  void Bind(TSNode target, const Value& v);
  void BindName(const std::string& name, const Value& v);
  Value Lookup(const std::string& name);
  void Import(TSNode n);
  void ImportFrom(TSNode n);
  void FunctionDef(TSNode n);
  void ClassDef(TSNode n);
  void RunFunction(const Deferred& d);
  void BindParameters(TSNode params, const ClassInfo* cls, bool is_method, bool is_forward, bool bind_now);
  void CollectLocals(TSNode n, Scope& scope, bool top);
  /// The names node `n` (of kind `k`) binds in `scope`; whether its children may bind more.
  bool CollectBindings(TSNode n, NodeKind k, Scope& scope, bool top);
  void CollectImportedNames(TSNode n, NodeKind k, Scope& scope);
  void CollectTargetNames(TSNode target, Scope& scope);
  Value Annotation(TSNode type);
  Value ScopedComprehension(TSNode n);
  /// The value of an identifier or attribute chain, without emitting events.
  Value PeekValue(TSNode n);
  /// `enumerate(x)`, `tqdm(x)`, `iter(x)`, `zip(x, ...)` → x (repeatedly).
  TSNode PeelIterableWrappers(TSNode n);
  std::string Text(TSNode n) const { return std::string(NodeText(n, src_.source)); }

  // Named children gathered with a reusable cursor: O(children) instead of O(children²).
  class Kids;
  friend class Kids;

  const PySyntax& syn_;
  const ParsedSource& src_;
  const ModuleSummary& summary_;
  ProjectIndex& index_;
  std::function<bool(const std::string&)> known_external_;
  EventSink& sink_;
  TSTreeCursor cursor_;
  std::vector<TSNode> kid_stack_;
  std::deque<Scope> scopes_;
  Scope* current_ = nullptr;
  Scope* module_scope_ = nullptr;
  std::deque<Deferred> deferred_;
  std::deque<ClassInfo> local_classes_;
  std::map<std::pair<const ClassInfo*, std::string>, Value> attr_overlay_;
  /// Qualified-name prefix of definitions in the scope being executed ("pkg.mod.Class").
  std::string qual_prefix_;
  /// The assignment statement being executed (for OnSubscriptAssign).
  TSNode current_assignment_{};
  /// Inside the type argument of isinstance/issubclass, a dictionary key, an `is`/`==` operand or
  /// an annotation: references are type tests, not uses.
  bool type_test_ = false;
  /// Nesting of Eval/Exec calls; beyond kMaxDepth the inner part of a node is not analysed (deep
  /// generated expressions must not overflow the stack).
  int depth_ = 0;
  bool too_deep_ = false;

 public:
  static constexpr int kMaxDepth = 800;
  /// Whether some part of the file was nested too deeply to analyse.
  bool too_deep() const { return too_deep_; }
};

}  // namespace portkit::analyse
