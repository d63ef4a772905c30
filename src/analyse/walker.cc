#include "analyse/walker.h"

namespace portkit::analyse {

namespace {
struct DepthGuard {
  explicit DepthGuard(int& d) : d_(d) { ++d_; }
  ~DepthGuard() { --d_; }
  int& d_;
};
}  // namespace

struct FileWalker::Scope {
  enum class Kind : uint8_t { kModule, kClass, kFunction } kind;
  Scope* parent = nullptr;
  std::unordered_map<std::string, Value> values;
  std::unordered_set<std::string> locals;
  std::unordered_set<std::string> globals;
  std::vector<std::string> external_stars;
  const ClassInfo* cls = nullptr;  // class scope: the class; function scope: class of `self`
};

class FileWalker::Kids {
 public:
  Kids(FileWalker& w, TSNode n) : w_(w), begin_(w.kid_stack_.size()) {
    ts_tree_cursor_reset(&w.cursor_, n);
    if (ts_tree_cursor_goto_first_child(&w.cursor_)) {
      do {
        TSNode c = ts_tree_cursor_current_node(&w.cursor_);
        if (ts_node_is_named(c)) w.kid_stack_.push_back(c);
      } while (ts_tree_cursor_goto_next_sibling(&w.cursor_));
    }
    end_ = w.kid_stack_.size();
  }
  ~Kids() { w_.kid_stack_.resize(begin_); }
  size_t size() const { return end_ - begin_; }
  TSNode operator[](size_t i) const { return w_.kid_stack_[begin_ + i]; }

 private:
  FileWalker& w_;
  size_t begin_, end_;
};

FileWalker::FileWalker(const PySyntax& syn, const ParsedSource& src, const ModuleSummary& summary, ProjectIndex& index,
                       std::function<bool(const std::string&)> known_external, EventSink& sink)
    : syn_(syn), src_(src), summary_(summary), index_(index), known_external_(std::move(known_external)), sink_(sink) {
  cursor_ = ts_tree_cursor_new(src.root());
}

FileWalker::~FileWalker() { ts_tree_cursor_delete(&cursor_); }

void FileWalker::Run() {
  if (!src_.tree) return;
  scopes_.push_back(Scope{Scope::Kind::kModule});
  module_scope_ = current_ = &scopes_.back();
  qual_prefix_ = summary_.module_name;
  sink_.OnFunction("", src_.root());
  ExecChildren(src_.root());
  while (!deferred_.empty()) {
    Deferred d = deferred_.front();
    deferred_.pop_front();
    RunFunction(d);
  }
}

// ---------------------------------------------------------------------------------------------
// Names

Value FileWalker::Lookup(const std::string& name) {
  for (Scope* s = current_; s; s = s->parent) {
    if (s->kind == Scope::Kind::kClass && s != current_) continue;
    if (s->kind == Scope::Kind::kFunction && s->globals.count(name)) {
      s = module_scope_;
    }
    if (auto it = s->values.find(name); it != s->values.end()) return it->second;
    if (s->kind == Scope::Kind::kFunction && s->locals.count(name)) return Value::Unknown();
    if (s->kind == Scope::Kind::kModule) {
      for (const auto& star : s->external_stars) {
        std::string q = star + "." + name;
        if (known_external_(q)) return Value::External(q);
      }
      return Value::Unknown();
    }
  }
  return Value::Unknown();
}

void FileWalker::BindName(const std::string& name, const Value& v) {
  Scope* s = current_;
  if (s->kind == Scope::Kind::kFunction && s->globals.count(name)) s = module_scope_;
  s->values[name] = v;
}

void FileWalker::Bind(TSNode target, const Value& v) {
  DepthGuard guard(depth_);
  if (depth_ > kMaxDepth) return;
  switch (syn_.Kind(target)) {
    case NodeKind::kIdentifier: BindName(Text(target), v); break;
    case NodeKind::kAttribute: {
      TSNode obj = ts_node_child_by_field_id(target, syn_.f_object);
      Value base = Eval(obj, Use::kObject);
      TSNode attr_node = ts_node_child_by_field_id(target, syn_.f_attribute);
      std::string attr = Text(attr_node);
      // The store itself is a reference (`torch.backends.cudnn.benchmark = True`).
      Value stored = base.kind == ValueKind::kExternal ? AttributeOf(base, attr, &index_) : Value::Unknown();
      AttributeEvent ev{target, stored.kind == ValueKind::kExternal ? stored.name : std::string(),
                        NodeText(attr_node, src_.source), true, false};
      sink_.OnReference(ev);
      if (base.kind == ValueKind::kUserInstance && base.cls && !v.is_unknown())
        attr_overlay_[{base.cls, std::move(attr)}] = v;
      break;
    }
    case NodeKind::kSubscript: {
      Value base = Eval(ts_node_child_by_field_id(target, syn_.f_value));
      Value index;
      Kids kids(*this, target);
      for (size_t i = 1; i < kids.size(); ++i) index = Eval(kids[i]);
      sink_.OnSubscriptAssign(current_assignment_, target, base, index);
      break;
    }
    case NodeKind::kPatternList:
    case NodeKind::kTuplePattern:
    case NodeKind::kListPattern:
    case NodeKind::kTuple:
    case NodeKind::kList:
    case NodeKind::kExpressionList: {
      Value element = v.kind == ValueKind::kTensorSeq ? Value::Tensor() : Value::Unknown();
      Kids kids(*this, target);
      for (size_t i = 0; i < kids.size(); ++i) Bind(kids[i], element);
      break;
    }
    case NodeKind::kListSplatPattern:
    case NodeKind::kParenthesizedExpression: {
      Kids kids(*this, target);
      for (size_t i = 0; i < kids.size(); ++i) Bind(kids[i], Value::Unknown());
      break;
    }
    default: break;
  }
}

// ---------------------------------------------------------------------------------------------
// Statements

void FileWalker::ExecChildren(TSNode n) {
  Kids kids(*this, n);
  for (size_t i = 0; i < kids.size(); ++i) Exec(kids[i]);
}

void FileWalker::Exec(TSNode n) {
  DepthGuard guard(depth_);
  if (depth_ > kMaxDepth) {
    too_deep_ = true;
    return;
  }
  switch (syn_.Kind(n)) {
    case NodeKind::kImportStatement: Import(n); return;
    case NodeKind::kImportFromStatement: ImportFrom(n); return;
    case NodeKind::kFutureImportStatement:
    case NodeKind::kComment: return;
    case NodeKind::kFunctionDefinition: FunctionDef(n); return;
    case NodeKind::kClassDefinition: ClassDef(n); return;
    case NodeKind::kDecoratedDefinition: ExecDecorated(n); return;
    case NodeKind::kGlobalStatement: {
      Kids kids(*this, n);
      for (size_t i = 0; i < kids.size(); ++i) current_->globals.insert(Text(kids[i]));
      return;
    }
    case NodeKind::kNonlocalStatement: return;
    case NodeKind::kForStatement: ExecFor(n); return;
    case NodeKind::kBlock:
    case NodeKind::kElseClause:
    case NodeKind::kElifClause:
    case NodeKind::kFinallyClause:
    case NodeKind::kIfStatement:
    case NodeKind::kWhileStatement:
    case NodeKind::kTryStatement:
    case NodeKind::kExceptClause:
    case NodeKind::kWithStatement:
    case NodeKind::kWithClause:
    case NodeKind::kModule: ExecCompound(n); return;
    case NodeKind::kWithItem: {
      TSNode value = ts_node_child_by_field_id(n, syn_.f_value);
      if (!ts_node_is_null(value)) Eval(value);
      return;
    }
    case NodeKind::kExpressionStatement:
    case NodeKind::kReturnStatement:
    default: {
      Kids kids(*this, n);
      for (size_t i = 0; i < kids.size(); ++i) Eval(kids[i]);
      return;
    }
  }
}

void FileWalker::ExecDecorated(TSNode n) {
  Kids kids(*this, n);
  for (size_t i = 0; i < kids.size(); ++i) {
    TSNode c = kids[i];
    if (syn_.Kind(c) == NodeKind::kDecorator) {
      Kids inner(*this, c);
      for (size_t j = 0; j < inner.size(); ++j) Eval(inner[j]);
    } else {
      Exec(c);
    }
  }
}

void FileWalker::ExecFor(TSNode n) {
  TSNode right = ts_node_child_by_field_id(n, syn_.f_right);
  Value iter = Eval(right);
  TSNode inner = PeelIterableWrappers(right);
  sink_.OnFor(n, inner, ts_node_eq(inner, right) ? iter : PeekValue(inner));
  Bind(ts_node_child_by_field_id(n, syn_.f_left),
       iter.kind == ValueKind::kTensorSeq || iter.kind == ValueKind::kTensor ? Value::Tensor() : Value::Unknown());
  TSNode body = ts_node_child_by_field_id(n, syn_.f_body);
  if (!ts_node_is_null(body)) ExecChildren(body);
  TSNode alt = ts_node_child_by_field_id(n, syn_.f_alternative);
  if (!ts_node_is_null(alt)) ExecChildren(alt);
}

void FileWalker::ExecCompound(TSNode n) {
  // The statements of a block or module; the clauses of a compound statement, whose other
  // children (conditions, `with` items' values, ...) are expressions.
  const bool statements = syn_.Kind(n) == NodeKind::kBlock || syn_.Kind(n) == NodeKind::kModule;
  Kids kids(*this, n);
  for (size_t i = 0; i < kids.size(); ++i) {
    TSNode c = kids[i];
    switch (syn_.Kind(c)) {
      case NodeKind::kBlock:
      case NodeKind::kElseClause:
      case NodeKind::kElifClause:
      case NodeKind::kFinallyClause:
      case NodeKind::kExceptClause:
      case NodeKind::kWithClause:
      case NodeKind::kWithItem: Exec(c); break;
      default:
        if (statements) Exec(c);
        else Eval(c);
    }
  }
}

void FileWalker::Import(TSNode n) {
  Kids kids(*this, n);
  for (size_t i = 0; i < kids.size(); ++i) {
    TSNode c = kids[i];
    if (syn_.Kind(c) == NodeKind::kAliasedImport) {
      std::string module = Text(ts_node_child_by_field_id(c, syn_.f_name));
      sink_.OnImport({n, module, {}, false, false});
      BindName(Text(ts_node_child_by_field_id(c, syn_.f_alias)), index_.ImportValue(summary_, module, 0, ""));
    } else if (syn_.Kind(c) == NodeKind::kDottedName) {
      std::string full = Text(c);
      sink_.OnImport({n, full, {}, false, false});
      std::string head = full.substr(0, full.find('.'));
      BindName(head, index_.ImportValue(summary_, head, 0, ""));
    }
  }
}

void FileWalker::ImportFrom(TSNode n) {
  TSNode mod = ts_node_child_by_field_id(n, syn_.f_module_name);
  int level = 0;
  std::string module;
  if (syn_.Kind(mod) == NodeKind::kRelativeImport) {
    Kids kids(*this, mod);
    for (size_t i = 0; i < kids.size(); ++i) {
      if (syn_.Kind(kids[i]) == NodeKind::kImportPrefix)
        level = static_cast<int>(NodeText(kids[i], src_.source).size());
      else module = Text(kids[i]);
    }
  } else {
    module = Text(mod);
    sink_.OnImport({n, module, {}, false, false});
  }
  Kids kids(*this, n);
  for (size_t i = 0; i < kids.size(); ++i) {
    TSNode c = kids[i];
    if (ts_node_eq(c, mod)) continue;
    switch (syn_.Kind(c)) {
      case NodeKind::kWildcardImport: {
        std::string abs = ResolveRelativeModule(summary_.module_name, summary_.is_package, level, module);
        if (index_.IsProjectModule(abs)) {
          for (const auto& name : index_.StarNames(abs)) BindName(name, index_.Export(abs, name));
        } else if (level == 0) {
          current_->external_stars.push_back(module);
        }
        break;
      }
      case NodeKind::kAliasedImport:
        if (level == 0)
          sink_.OnImport({c, module + "." + Text(ts_node_child_by_field_id(c, syn_.f_name)), {}, false, false});
        BindName(Text(ts_node_child_by_field_id(c, syn_.f_alias)),
                 index_.ImportValue(summary_, module, level, Text(ts_node_child_by_field_id(c, syn_.f_name))));
        break;
      case NodeKind::kDottedName: {
        std::string name = Text(c);
        if (level == 0) sink_.OnImport({c, module + "." + name, {}, false, false});
        BindName(name, index_.ImportValue(summary_, module, level, name));
        break;
      }
      default: break;
    }
  }
}

void FileWalker::FunctionDef(TSNode n) {
  std::string name = Text(ts_node_child_by_field_id(n, syn_.f_name));
  // Defaults and annotations are evaluated where the function is defined.
  TSNode params = ts_node_child_by_field_id(n, syn_.f_parameters);
  if (!ts_node_is_null(params)) {
    Kids kids(*this, params);
    for (size_t i = 0; i < kids.size(); ++i) {
      TSNode p = kids[i];
      TSNode v = ts_node_child_by_field_id(p, syn_.f_value);
      if (!ts_node_is_null(v)) Eval(v);
    }
  }
  const ClassInfo* cls = current_->kind == Scope::Kind::kClass ? current_->cls : nullptr;
  Scope* parent = current_;
  while (parent->kind == Scope::Kind::kClass) parent = parent->parent;
  std::string qualname = qual_prefix_ + "." + name;
  BindName(name, Value::UserFunction(qualname));
  deferred_.push_back({n, parent, cls, qualname});
}

void FileWalker::ClassDef(TSNode n) {
  std::string name = Text(ts_node_child_by_field_id(n, syn_.f_name));
  TSNode supers = ts_node_child_by_field_id(n, syn_.f_superclasses);
  std::vector<Value> bases;
  if (!ts_node_is_null(supers)) {
    Kids kids(*this, supers);
    for (size_t i = 0; i < kids.size(); ++i) bases.push_back(Eval(kids[i]));
  }
  const ClassInfo* cls = nullptr;
  if (current_ == module_scope_) {
    auto it = summary_.names.find(name);
    if (it != summary_.names.end() && it->second.kind == TopBinding::Kind::kClass)
      cls = summary_.classes[it->second.class_index].get();
  }
  if (!cls) {
    // A class inside a function or a conditional redefinition: resolve it from this scope.
    local_classes_.emplace_back();
    ClassInfo& local = local_classes_.back();
    local.module = summary_.module_name;
    local.name = name;
    local.qualname = qual_prefix_ + "." + name;
    local.resolved = true;
    for (const auto& b : bases) {
      if (b.kind == ValueKind::kExternal && IsTorchClassName(b.name)) {
        if (local.torch_base.empty()) local.torch_base = b.name;
      } else if (b.kind == ValueKind::kUserClass && b.cls) {
        if (local.torch_base.empty()) local.torch_base = b.cls->torch_base;
        local.user_bases.push_back(b.cls);
      }
    }
    TSNode body = ts_node_child_by_field_id(n, syn_.f_body);
    if (!ts_node_is_null(body)) {
      Kids kids(*this, body);
      for (size_t i = 0; i < kids.size(); ++i) {
        TSNode c = kids[i];
        if (syn_.Kind(c) == NodeKind::kDecoratedDefinition) c = ts_node_child_by_field_id(c, syn_.f_definition);
        if (!ts_node_is_null(c) && syn_.Kind(c) == NodeKind::kFunctionDefinition)
          local.methods.insert(Text(ts_node_child_by_field_id(c, syn_.f_name)));
      }
    }
    cls = &local;
  }
  BindName(name, Value::UserClass(cls));
  scopes_.push_back(Scope{Scope::Kind::kClass});
  Scope& scope = scopes_.back();
  scope.parent = current_;
  scope.cls = cls;
  Scope* saved = current_;
  current_ = &scope;
  std::string saved_prefix = qual_prefix_;
  qual_prefix_ = cls->QualifiedName();
  TSNode body = ts_node_child_by_field_id(n, syn_.f_body);
  if (!ts_node_is_null(body)) ExecChildren(body);
  qual_prefix_ = saved_prefix;
  current_ = saved;
}

void FileWalker::RunFunction(const Deferred& d) {
  scopes_.push_back(Scope{Scope::Kind::kFunction});
  Scope& scope = scopes_.back();
  scope.parent = d.parent;
  scope.cls = d.cls;
  TSNode params = ts_node_child_by_field_id(d.def, syn_.f_parameters);
  TSNode body = ts_node_child_by_field_id(d.def, syn_.f_body);
  if (!ts_node_is_null(params)) CollectLocals(params, scope, true);
  if (!ts_node_is_null(body)) CollectLocals(body, scope, true);
  Scope* saved = current_;
  current_ = &scope;
  qual_prefix_ = d.qualname + ".<locals>";
  sink_.OnFunction(d.qualname, d.def);
  std::string name = Text(ts_node_child_by_field_id(d.def, syn_.f_name));
  if (!ts_node_is_null(params))
    BindParameters(params, d.cls, d.cls != nullptr, name == "forward" && d.cls && d.cls->is_torch_module(), true);
  if (!ts_node_is_null(body)) ExecChildren(body);
  current_ = saved;
}

Value FileWalker::Annotation(TSNode type) {
  if (ts_node_is_null(type)) return Value::Unknown();
  bool saved = type_test_;
  type_test_ = true;  // `x: torch.cuda.FloatTensor` names a type, it does not use it
  Value v = Eval(type);
  type_test_ = saved;
  if (v.kind == ValueKind::kExternal && (v.name == "torch.Tensor" || v.name == "torch.nn.Parameter"))
    return Value::Tensor();
  if (v.kind == ValueKind::kExternal && IsTorchClassName(v.name)) return Value::Instance(v.name);
  if (v.kind == ValueKind::kUserClass) return Value::UserInstance(v.cls);
  // Builtin containers and scalars (dict, List[int], ...) are known not to be tensors.
  static constexpr std::string_view kBuiltins[] = {"dict", "list",  "set",   "tuple",    "str",
                                                   "int",  "float", "bool",  "bytes",    "Dict",
                                                   "List", "Set",   "Tuple", "Sequence", "Mapping"};
  std::string head = Text(type);
  head = head.substr(0, head.find('['));
  for (auto b : kBuiltins)
    if (head == b || head == "typing." + std::string(b)) return Value::Other();
  // Optional[torch.Tensor] and friends.
  std::string text = Text(type);
  if (text.find("Tensor") != std::string::npos && syn_.Kind(ts_node_named_child(type, 0)) == NodeKind::kSubscript)
    return Value::Tensor();
  return Value::Unknown();
}

void FileWalker::BindParameters(TSNode params, const ClassInfo* cls, bool is_method, bool is_forward,
                                bool /*bind_now*/) {
  Kids kids(*this, params);
  bool first = true;
  for (size_t i = 0; i < kids.size(); ++i) {
    TSNode p = kids[i];
    std::string name;
    Value v;
    switch (syn_.Kind(p)) {
      case NodeKind::kIdentifier: name = Text(p); break;
      case NodeKind::kTypedParameter: {
        TSNode id = ts_node_named_child(p, 0);
        name = Text(id);
        v = Annotation(ts_node_child_by_field_id(p, syn_.f_type));
        if (syn_.Kind(id) != NodeKind::kIdentifier) name.clear();
        break;
      }
      case NodeKind::kDefaultParameter: name = Text(ts_node_child_by_field_id(p, syn_.f_name)); break;
      case NodeKind::kTypedDefaultParameter:
        name = Text(ts_node_child_by_field_id(p, syn_.f_name));
        v = Annotation(ts_node_child_by_field_id(p, syn_.f_type));
        break;
      default: first = false; continue;
    }
    if (name.empty()) continue;
    if (first && is_method) {
      v = Value::UserInstance(cls);
    } else if (is_forward && v.is_unknown()) {
      v = Value::Tensor();
    }
    first = false;
    current_->values[name] = v;
  }
}

void FileWalker::CollectTargetNames(TSNode target, Scope& scope) {
  DepthGuard guard(depth_);
  if (depth_ > kMaxDepth) return;
  NodeKind k = syn_.Kind(target);
  if (k == NodeKind::kIdentifier) {
    scope.locals.insert(Text(target));
    return;
  }
  if (k == NodeKind::kAttribute || k == NodeKind::kSubscript) return;
  Kids kids(*this, target);
  for (size_t i = 0; i < kids.size(); ++i) CollectTargetNames(kids[i], scope);
}

namespace {

// Whether CollectLocals looks for bindings inside a node of kind `k`: bindings happen in
// statements, so only statement containers are entered, not expressions (a walrus inside a
// deeper expression is the one binding this misses); parameter lists only at the top.
bool EntersForLocals(NodeKind k, bool top) {
  switch (k) {
    case NodeKind::kBlock:
    case NodeKind::kModule:
    case NodeKind::kIfStatement:
    case NodeKind::kElifClause:
    case NodeKind::kElseClause:
    case NodeKind::kForStatement:
    case NodeKind::kWhileStatement:
    case NodeKind::kTryStatement:
    case NodeKind::kExceptClause:
    case NodeKind::kFinallyClause:
    case NodeKind::kWithStatement:
    case NodeKind::kWithClause:
    case NodeKind::kWithItem:
    case NodeKind::kAsPattern:
    case NodeKind::kExpressionStatement:
    case NodeKind::kDecoratedDefinition: return true;
    case NodeKind::kParameters:
    case NodeKind::kLambdaParameters: return top;
    default: return false;
  }
}

}  // namespace

void FileWalker::CollectLocals(TSNode n, Scope& scope, bool top) {
  DepthGuard guard(depth_);
  if (depth_ > kMaxDepth) {
    too_deep_ = true;
    return;
  }
  NodeKind k = syn_.Kind(n);
  if (!CollectBindings(n, k, scope, top) || !EntersForLocals(k, top)) return;
  Kids kids(*this, n);
  bool params = k == NodeKind::kParameters || k == NodeKind::kLambdaParameters;
  for (size_t i = 0; i < kids.size(); ++i) CollectLocals(kids[i], scope, params);
}

bool FileWalker::CollectBindings(TSNode n, NodeKind k, Scope& scope, bool top) {
  switch (k) {
    case NodeKind::kFunctionDefinition:
    case NodeKind::kClassDefinition:
      if (top) return true;
      scope.locals.insert(Text(ts_node_child_by_field_id(n, syn_.f_name)));
      return false;
    case NodeKind::kLambda:
    case NodeKind::kListComprehension:
    case NodeKind::kSetComprehension:
    case NodeKind::kDictionaryComprehension:
    case NodeKind::kGeneratorExpression: return false;
    case NodeKind::kIdentifier:
      if (top) scope.locals.insert(Text(n));  // a bare parameter
      return false;
    case NodeKind::kTypedParameter: CollectTargetNames(ts_node_named_child(n, 0), scope); return false;
    case NodeKind::kDefaultParameter:
    case NodeKind::kTypedDefaultParameter:
      CollectTargetNames(ts_node_child_by_field_id(n, syn_.f_name), scope);
      return false;
    case NodeKind::kListSplatPattern:
    case NodeKind::kDictionarySplatPattern:
    case NodeKind::kAsPatternTarget: CollectTargetNames(n, scope); return false;
    case NodeKind::kAssignment: {
      CollectTargetNames(ts_node_child_by_field_id(n, syn_.f_left), scope);
      TSNode right = ts_node_child_by_field_id(n, syn_.f_right);
      if (syn_.Kind(right) == NodeKind::kAssignment) CollectLocals(right, scope, false);  // a = b = 1
      return false;
    }
    case NodeKind::kAugmentedAssignment:
      CollectTargetNames(ts_node_child_by_field_id(n, syn_.f_left), scope);
      return false;
    case NodeKind::kForStatement: CollectTargetNames(ts_node_child_by_field_id(n, syn_.f_left), scope); return true;
    case NodeKind::kNamedExpression: CollectTargetNames(ts_node_child_by_field_id(n, syn_.f_name), scope); return false;
    case NodeKind::kImportStatement:
    case NodeKind::kImportFromStatement: CollectImportedNames(n, k, scope); return false;
    case NodeKind::kGlobalStatement: {
      Kids kids(*this, n);
      for (size_t i = 0; i < kids.size(); ++i) scope.globals.insert(Text(kids[i]));
      return false;
    }
    default: return true;
  }
}

void FileWalker::CollectImportedNames(TSNode n, NodeKind k, Scope& scope) {
  TSNode mod = k == NodeKind::kImportFromStatement ? ts_node_child_by_field_id(n, syn_.f_module_name) : TSNode{};
  Kids kids(*this, n);
  for (size_t i = 0; i < kids.size(); ++i) {
    TSNode c = kids[i];
    if (k == NodeKind::kImportFromStatement) {
      if (ts_node_eq(c, mod)) continue;
      if (syn_.Kind(c) == NodeKind::kAliasedImport)
        scope.locals.insert(Text(ts_node_child_by_field_id(c, syn_.f_alias)));
      else if (syn_.Kind(c) == NodeKind::kDottedName) scope.locals.insert(Text(c));
    } else if (syn_.Kind(c) == NodeKind::kAliasedImport) {
      scope.locals.insert(Text(ts_node_child_by_field_id(c, syn_.f_alias)));
    } else {
      std::string full = Text(c);
      scope.locals.insert(full.substr(0, full.find('.')));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Expressions

Value FileWalker::Eval(TSNode n, Use use) {
  if (ts_node_is_null(n)) return Value::Unknown();
  DepthGuard guard(depth_);
  if (depth_ > kMaxDepth) {
    too_deep_ = true;
    return Value::Unknown();
  }
  switch (syn_.Kind(n)) {
    case NodeKind::kIdentifier: {
      Value v = Lookup(Text(n));
      if (use == Use::kValue && v.kind == ValueKind::kExternal) sink_.OnReference({n, v.name, {}, false, type_test_});
      return v;
    }
    case NodeKind::kAttribute: return EvalAttribute(n, use);
    case NodeKind::kCall: return EvalCall(n);
    case NodeKind::kAssignment: return EvalAssignment(n);
    case NodeKind::kAugmentedAssignment: return EvalAugmentedAssignment(n);
    case NodeKind::kSubscript: return EvalSubscript(n);
    case NodeKind::kBinaryOperator:
    case NodeKind::kComparisonOperator: return EvalOperator(n);
    case NodeKind::kUnaryOperator:
    case NodeKind::kParenthesizedExpression:
    case NodeKind::kAwait:
    case NodeKind::kType: {
      Kids kids(*this, n);
      Value v;
      for (size_t i = 0; i < kids.size(); ++i) v = Eval(kids[i], use);
      return v;
    }
    case NodeKind::kNamedExpression: {
      Value v = Eval(ts_node_child_by_field_id(n, syn_.f_value));
      Bind(ts_node_child_by_field_id(n, syn_.f_name), v);
      return v;
    }
    case NodeKind::kConditionalExpression: return EvalConditional(n);
    case NodeKind::kString: return EvalString(n);
    case NodeKind::kInteger:
    case NodeKind::kFloat:
    case NodeKind::kTrue:
    case NodeKind::kFalse:
    case NodeKind::kNone:
    case NodeKind::kComment: return Value::Other();
    case NodeKind::kDictionary:
    case NodeKind::kList:
    case NodeKind::kSet:
    case NodeKind::kTuple: return EvalContainer(n);
    case NodeKind::kLambda:
    case NodeKind::kListComprehension:
    case NodeKind::kSetComprehension:
    case NodeKind::kDictionaryComprehension:
    case NodeKind::kGeneratorExpression: return ScopedComprehension(n);
    case NodeKind::kKeywordArgument: return Eval(ts_node_child_by_field_id(n, syn_.f_value));
    default: {
      Kids kids(*this, n);
      for (size_t i = 0; i < kids.size(); ++i) Eval(kids[i]);
      return Value::Unknown();
    }
  }
}

Value FileWalker::EvalAssignment(TSNode n) {
  TSNode right = ts_node_child_by_field_id(n, syn_.f_right);
  Value v = Eval(right);
  TSNode type = ts_node_child_by_field_id(n, syn_.f_type);
  if (!ts_node_is_null(type)) {
    Value annotated = Annotation(type);
    if (!annotated.is_unknown()) v = annotated;
  }
  TSNode saved = current_assignment_;
  current_assignment_ = n;
  Bind(ts_node_child_by_field_id(n, syn_.f_left), v);
  current_assignment_ = saved;
  return v;
}

Value FileWalker::EvalAugmentedAssignment(TSNode n) {
  Value r = Eval(ts_node_child_by_field_id(n, syn_.f_right));
  TSNode left = ts_node_child_by_field_id(n, syn_.f_left);
  Value l = Eval(left);
  if (syn_.Kind(left) == NodeKind::kIdentifier)
    BindName(Text(left), l.kind == ValueKind::kTensor || r.kind == ValueKind::kTensor ? Value::Tensor() : l);
  return l;
}

Value FileWalker::EvalSubscript(TSNode n) {
  Value base = Eval(ts_node_child_by_field_id(n, syn_.f_value));
  Kids kids(*this, n);
  for (size_t i = 1; i < kids.size(); ++i) Eval(kids[i]);
  if (base.kind == ValueKind::kTensor || base.kind == ValueKind::kTensorSeq) return Value::Tensor();
  return Value::Unknown();
}

Value FileWalker::EvalOperator(TSNode n) {
  Kids kids(*this, n);
  bool tensor = false;
  bool saved = type_test_;
  // `type(m) is nn.X`, `x.dtype == torch.float64`: the operands are compared, not used.
  if (syn_.Kind(n) == NodeKind::kComparisonOperator) type_test_ = true;
  for (size_t i = 0; i < kids.size(); ++i) tensor |= Eval(kids[i]).kind == ValueKind::kTensor;
  type_test_ = saved;
  return tensor ? Value::Tensor() : Value::Unknown();
}

Value FileWalker::EvalConditional(TSNode n) {
  Kids kids(*this, n);
  Value first;
  bool same = true;
  for (size_t i = 0; i < kids.size(); ++i) {
    Value v = Eval(kids[i]);
    if (i == 0) first = v;
    else if (i == 2 && v.kind != first.kind) same = false;
  }
  return same ? first : Value::Unknown();
}

Value FileWalker::EvalString(TSNode n) {
  std::string value;
  if (StringLiteralValue(syn_, n, src_.source, &value)) {
    sink_.OnString({n, std::move(value)});
  } else {
    Kids kids(*this, n);  // f-string interpolations
    for (size_t i = 0; i < kids.size(); ++i) {
      TSNode c = kids[i];
      std::string_view type = ts_node_type(c);
      if (type == "string_content" || type == "escape_sequence") value.append(NodeText(c, src_.source));
      else if (type == "interpolation") value.append("{}");
      Eval(c);
    }
    sink_.OnFormattedString({n, std::move(value), true});
  }
  return Value::Other();
}

Value FileWalker::EvalContainer(TSNode n) {
  // A container literal is not a tensor (its elements are still visited for events).
  bool dict = syn_.Kind(n) == NodeKind::kDictionary;
  Kids kids(*this, n);
  for (size_t i = 0; i < kids.size(); ++i) {
    TSNode c = kids[i];
    if (dict && std::string_view(ts_node_type(c)) == "pair") {
      // `{nn.AdaptiveMaxPool2d: hook}`: a key is looked up, not used.
      bool saved = type_test_;
      type_test_ = true;
      Eval(ts_node_child_by_field_name(c, "key", 3));
      type_test_ = saved;
      Eval(ts_node_child_by_field_name(c, "value", 5));
    } else {
      Eval(c);
    }
  }
  return Value::Other();
}

Value FileWalker::ScopedComprehension(TSNode n) {
  scopes_.push_back(Scope{Scope::Kind::kFunction});
  Scope& scope = scopes_.back();
  scope.parent = current_;
  Scope* saved = current_;
  current_ = &scope;
  bool lambda = syn_.Kind(n) == NodeKind::kLambda;
  Kids kids(*this, n);
  // Clauses first (they bind the loop variables), then the element expression.
  for (size_t i = 0; i < kids.size(); ++i) {
    TSNode c = kids[i];
    NodeKind k = syn_.Kind(c);
    if (k == NodeKind::kForInClause) {
      Value iter = Eval(ts_node_child_by_field_id(c, syn_.f_right));
      Bind(ts_node_child_by_field_id(c, syn_.f_left),
           iter.kind == ValueKind::kTensorSeq ? Value::Tensor() : Value::Unknown());
    } else if (k == NodeKind::kLambdaParameters) {
      CollectLocals(c, scope, true);
    }
  }
  for (size_t i = 0; i < kids.size(); ++i) {
    TSNode c = kids[i];
    NodeKind k = syn_.Kind(c);
    if (k == NodeKind::kForInClause || k == NodeKind::kLambdaParameters) continue;
    Eval(c);
  }
  current_ = saved;
  (void)lambda;
  return Value::Unknown();
}

Value FileWalker::PeekValue(TSNode n) {
  DepthGuard guard(depth_);
  if (depth_ > kMaxDepth) return Value::Unknown();
  switch (syn_.Kind(n)) {
    case NodeKind::kIdentifier: return Lookup(Text(n));
    case NodeKind::kAttribute: {
      Value base = PeekValue(ts_node_child_by_field_id(n, syn_.f_object));
      std::string attr = Text(ts_node_child_by_field_id(n, syn_.f_attribute));
      if (base.kind == ValueKind::kUserInstance && base.cls) {
        if (auto it = attr_overlay_.find({base.cls, attr}); it != attr_overlay_.end()) return it->second;
      }
      return AttributeOf(base, attr, &index_);
    }
    case NodeKind::kParenthesizedExpression: return PeekValue(ts_node_named_child(n, 0));
    default: return Value::Unknown();
  }
}

TSNode FileWalker::PeelIterableWrappers(TSNode n) {
  for (int depth = 0; depth < 8 && syn_.Kind(n) == NodeKind::kCall; ++depth) {
    std::string callee = DottedText(syn_, ts_node_child_by_field_id(n, syn_.f_function), src_.source);
    std::string last = callee.substr(callee.rfind('.') + 1);
    if (last != "enumerate" && last != "tqdm" && last != "trange" && last != "iter" && last != "zip") break;
    TSNode args = ts_node_child_by_field_id(n, syn_.f_arguments);
    if (ts_node_is_null(args) || ts_node_named_child_count(args) == 0) break;
    TSNode first = ts_node_named_child(args, 0);
    if (syn_.Kind(first) == NodeKind::kKeywordArgument) break;
    n = first;
  }
  return n;
}

Value FileWalker::EvalAttribute(TSNode n, Use use) {
  TSNode obj = ts_node_child_by_field_id(n, syn_.f_object);
  std::string attr = Text(ts_node_child_by_field_id(n, syn_.f_attribute));
  Value base = Eval(obj, Use::kObject);
  Value v;
  if (base.kind == ValueKind::kUserInstance && base.cls) {
    if (auto it = attr_overlay_.find({base.cls, attr}); it != attr_overlay_.end()) v = it->second;
  }
  if (v.is_unknown()) v = AttributeOf(base, attr, &index_);
  if (use == Use::kValue || use == Use::kStore) {
    if (v.kind == ValueKind::kExternal) {
      sink_.OnAttribute({n, v.name, {}, false, type_test_});
    } else {
      sink_.OnReference(
          {n, {}, NodeText(ts_node_child_by_field_id(n, syn_.f_attribute), src_.source), false, type_test_});
    }
  }
  return v;
}

Value FileWalker::EvalCall(TSNode n) {
  TSNode fn = ts_node_child_by_field_id(n, syn_.f_function);
  CallEvent ev;
  ev.node = n;
  Value receiver;
  bool is_method = syn_.Kind(fn) == NodeKind::kAttribute;
  ev.callee = Eval(fn, Use::kCallee);
  // isinstance(m, nn.X) / issubclass(c, nn.X): the second argument is a type test.
  bool type_test_call = false;
  if (syn_.Kind(fn) == NodeKind::kIdentifier) {
    std::string_view name = NodeText(fn, src_.source);
    type_test_call = (name == "isinstance" || name == "issubclass") && ev.callee.is_unknown();
  }
  if (is_method) {
    TSNode attr = ts_node_child_by_field_id(fn, syn_.f_attribute);
    ev.method = NodeText(attr, src_.source);
    TSNode obj = ts_node_child_by_field_id(fn, syn_.f_object);
    if (syn_.Kind(obj) == NodeKind::kCall) {
      TSNode inner = ts_node_child_by_field_id(obj, syn_.f_function);
      ev.super_receiver = syn_.Kind(inner) == NodeKind::kIdentifier && NodeText(inner, src_.source) == "super";
    }
    // Re-evaluating the receiver would emit its events twice; classify from the callee instead.
    ev.receiver_unknown = ev.callee.is_unknown();
  }
  TSNode args = ts_node_child_by_field_id(n, syn_.f_arguments);
  if (!ts_node_is_null(args)) {
    if (syn_.Kind(args) == NodeKind::kGeneratorExpression) {
      ev.args.push_back({{}, args, Eval(args), false});
    } else {
      Kids kids(*this, args);
      for (size_t i = 0; i < kids.size(); ++i) {
        TSNode a = kids[i];
        NodeKind k = syn_.Kind(a);
        if (k == NodeKind::kComment) continue;
        if (k == NodeKind::kKeywordArgument) {
          TSNode value = ts_node_child_by_field_id(a, syn_.f_value);
          ev.args.push_back(
              {NodeText(ts_node_child_by_field_id(a, syn_.f_name), src_.source), value, Eval(value), false});
        } else if (k == NodeKind::kListSplat || k == NodeKind::kDictionarySplat) {
          ev.args.push_back({{}, a, Eval(a), true});
        } else if (type_test_call && i == 1) {
          bool saved = type_test_;
          type_test_ = true;
          ev.args.push_back({{}, a, Eval(a), false});
          type_test_ = saved;
        } else {
          ev.args.push_back({{}, a, Eval(a), false});
        }
      }
    }
  }
  // self.register_buffer("name", tensor) makes self.name a tensor.
  if (is_method && ev.method == "register_buffer" && !ev.args.empty()) {
    TSNode obj = ts_node_child_by_field_id(fn, syn_.f_object);
    std::string name;
    if (syn_.Kind(obj) == NodeKind::kIdentifier && StringLiteralValue(syn_, ev.args[0].value, src_.source, &name)) {
      Value self = Lookup(Text(obj));
      if (self.kind == ValueKind::kUserInstance && self.cls) attr_overlay_[{self.cls, name}] = Value::Tensor();
    }
  }
  ev.lookup = LookupNames(ev.callee);
  sink_.OnCall(ev);
  // importlib.import_module("name") is the module `name` (apex loads its extensions so).
  std::string imported;
  if (ev.callee.kind == ValueKind::kExternal && ev.callee.name == "importlib.import_module" && ev.args.size() == 1 &&
      ev.args[0].keyword.empty() && !ev.args[0].splat &&
      StringLiteralValue(syn_, ev.args[0].value, src_.source, &imported) && !imported.empty() &&
      imported.front() != '.')
    return index_.IsProjectModule(imported) ? Value::UserModule(imported) : Value::External(imported);
  return CallResult(ev.callee, &index_);
}

}  // namespace portkit::analyse
