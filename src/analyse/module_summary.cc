#include "analyse/module_summary.h"

#include <cstdint>

namespace portkit::analyse {
namespace {

class Summariser {
 public:
  Summariser(const PySyntax& syn, std::string_view src, ModuleSummary& out) : syn_(syn), src_(src), out_(out) {}

  void Block(TSNode block) {
    for (TSNode c : NamedChildren(block)) Statement(c);
  }

 private:
  void Statement(TSNode n) {
    switch (syn_.Kind(n)) {
      case NodeKind::kImportStatement: Import(n); break;
      case NodeKind::kImportFromStatement: ImportFrom(n); break;
      case NodeKind::kFunctionDefinition: Function(n); break;
      case NodeKind::kClassDefinition: Class(n); break;
      case NodeKind::kDecoratedDefinition: {
        TSNode def = ts_node_child_by_field_id(n, syn_.f_definition);
        if (!ts_node_is_null(def)) Statement(def);
        break;
      }
      case NodeKind::kExpressionStatement: {
        TSNode e = ts_node_named_child(n, 0);
        if (!ts_node_is_null(e) && syn_.Kind(e) == NodeKind::kAssignment) Assignment(e);
        if (!ts_node_is_null(e) && syn_.Kind(e) == NodeKind::kAugmentedAssignment) AugAll(e);
        break;
      }
      case NodeKind::kIfStatement:
      case NodeKind::kTryStatement:
      case NodeKind::kWithStatement:
      case NodeKind::kElseClause:
      case NodeKind::kElifClause:
      case NodeKind::kExceptClause:
      case NodeKind::kFinallyClause:
      case NodeKind::kBlock:
      case NodeKind::kForStatement:
      case NodeKind::kWhileStatement: {
        for (TSNode c : NamedChildren(n)) {
          NodeKind k = syn_.Kind(c);
          if (k == NodeKind::kBlock) Block(c);
          else if (k == NodeKind::kElseClause || k == NodeKind::kElifClause || k == NodeKind::kExceptClause ||
                   k == NodeKind::kFinallyClause)
            Statement(c);
        }
        break;
      }
      default: break;
    }
  }

  void Import(TSNode n) {
    for (TSNode c : NamedChildren(n)) {
      TopBinding b;
      b.kind = TopBinding::Kind::kImportModule;
      if (syn_.Kind(c) == NodeKind::kAliasedImport) {
        b.module = std::string(NodeText(ts_node_child_by_field_id(c, syn_.f_name), src_));
        std::string alias(NodeText(ts_node_child_by_field_id(c, syn_.f_alias), src_));
        out_.names[alias] = b;
      } else if (syn_.Kind(c) == NodeKind::kDottedName) {
        std::string full(NodeText(c, src_));
        b.module = full.substr(0, full.find('.'));
        out_.names[b.module] = b;
      }
    }
  }

  void ImportFrom(TSNode n) {
    TSNode mod = ts_node_child_by_field_id(n, syn_.f_module_name);
    int level = 0;
    std::string module;
    if (syn_.Kind(mod) == NodeKind::kRelativeImport) {
      for (TSNode c : NamedChildren(mod)) {
        if (syn_.Kind(c) == NodeKind::kImportPrefix) level = static_cast<int>(NodeText(c, src_).size());
        else module = std::string(NodeText(c, src_));
      }
    } else {
      module = std::string(NodeText(mod, src_));
    }
    for (TSNode c : NamedChildren(n)) {
      if (ts_node_eq(c, mod)) continue;
      NodeKind k = syn_.Kind(c);
      if (k == NodeKind::kWildcardImport) {
        out_.star_imports.emplace_back(module, level);
        continue;
      }
      TopBinding b;
      b.kind = TopBinding::Kind::kImportFrom;
      b.module = module;
      b.level = level;
      if (k == NodeKind::kAliasedImport) {
        b.attr = std::string(NodeText(ts_node_child_by_field_id(c, syn_.f_name), src_));
        out_.names[std::string(NodeText(ts_node_child_by_field_id(c, syn_.f_alias), src_))] = b;
      } else if (k == NodeKind::kDottedName) {
        b.attr = std::string(NodeText(c, src_));
        out_.names[b.attr] = b;
      }
    }
  }

  void Function(TSNode n) {
    TopBinding b;
    b.kind = TopBinding::Kind::kFunction;
    out_.names[std::string(NodeText(ts_node_child_by_field_id(n, syn_.f_name), src_))] = b;
  }

  void Class(TSNode n) {
    auto info = std::make_unique<ClassInfo>();
    info->module = out_.module_name;
    info->name = std::string(NodeText(ts_node_child_by_field_id(n, syn_.f_name), src_));
    info->qualname = out_.module_name + "." + info->name;
    TSNode supers = ts_node_child_by_field_id(n, syn_.f_superclasses);
    if (!ts_node_is_null(supers)) {
      for (TSNode base : NamedChildren(supers)) {
        std::string d = DottedText(syn_, base, src_);
        if (!d.empty()) info->base_exprs.push_back(std::move(d));
      }
    }
    TSNode body = ts_node_child_by_field_id(n, syn_.f_body);
    if (!ts_node_is_null(body)) {
      for (TSNode c : NamedChildren(body)) {
        bool is_static = false;
        if (syn_.Kind(c) == NodeKind::kDecoratedDefinition) {
          for (TSNode d : NamedChildren(c))
            if (syn_.Kind(d) == NodeKind::kDecorator &&
                NodeText(d, src_).find("staticmethod") != std::string_view::npos)
              is_static = true;
          c = ts_node_child_by_field_id(c, syn_.f_definition);
        }
        if (ts_node_is_null(c) || syn_.Kind(c) != NodeKind::kFunctionDefinition) continue;
        std::string method(NodeText(ts_node_child_by_field_id(c, syn_.f_name), src_));
        info->method_arity[method] = Arity(ts_node_child_by_field_id(c, syn_.f_parameters), !is_static);
        info->methods.insert(std::move(method));
        SelfAttributes(ts_node_child_by_field_id(c, syn_.f_body), *info);
      }
    }
    TopBinding b;
    b.kind = TopBinding::Kind::kClass;
    b.class_index = out_.classes.size();
    out_.names[info->name] = b;
    out_.classes.push_back(std::move(info));
  }

  // (fewest, most) arguments a call passes to a function with parameters `params`; `bound`: the
  // first parameter is self/cls.
  std::pair<int, int> Arity(TSNode params, bool bound) {
    int fewest = 0, most = 0;
    bool keyword_only = false;
    if (!ts_node_is_null(params)) {
      for (TSNode p : NamedChildren(params)) {
        NodeKind k = syn_.Kind(p);
        if (k == NodeKind::kTypedParameter) {
          TSNode inner = ts_node_named_child(p, 0);
          NodeKind ik = syn_.Kind(inner);
          if (ik == NodeKind::kListSplatPattern || ik == NodeKind::kDictionarySplatPattern) k = ik;
        }
        if (k == NodeKind::kListSplatPattern) {
          most = INT32_MAX;
          keyword_only = true;
        } else if (k == NodeKind::kDictionarySplatPattern) {
          most = INT32_MAX;
        } else if (k == NodeKind::kIdentifier || k == NodeKind::kTypedParameter) {
          if (bound) {
            bound = false;
            continue;
          }
          ++fewest;
          if (most != INT32_MAX) ++most;
        } else if (k == NodeKind::kDefaultParameter || k == NodeKind::kTypedDefaultParameter) {
          if (bound) {
            bound = false;
            continue;
          }
          if (most != INT32_MAX) ++most;
        } else if (NodeText(p, src_) == "*") {
          keyword_only = true;
        }
      }
    }
    (void)keyword_only;
    return {fewest, most};
  }

  // `self.X = callee(...)`, `self.X = a.b` and `self.register_buffer("X", ...)` statements in a
  // method body. Only statements are visited (not expressions): this pass must stay cheap.
  void SelfAttributes(TSNode body, ClassInfo& info) {
    if (ts_node_is_null(body)) return;
    ForEachNamedNode(body, [&](TSNode n) {
      switch (syn_.Kind(n)) {
        case NodeKind::kAssignment: SelfAssignment(n, info); return false;
        case NodeKind::kCall: RegisterBuffer(n, info); return false;
        case NodeKind::kBlock:
        case NodeKind::kIfStatement:
        case NodeKind::kElifClause:
        case NodeKind::kElseClause:
        case NodeKind::kForStatement:
        case NodeKind::kWhileStatement:
        case NodeKind::kTryStatement:
        case NodeKind::kExceptClause:
        case NodeKind::kFinallyClause:
        case NodeKind::kWithStatement:
        case NodeKind::kExpressionStatement: return true;
        default: return false;
      }
    });
  }

  void SelfAssignment(TSNode n, ClassInfo& info) {
    TSNode left = ts_node_child_by_field_id(n, syn_.f_left);
    TSNode right = ts_node_child_by_field_id(n, syn_.f_right);
    if (ts_node_is_null(left) || syn_.Kind(left) != NodeKind::kAttribute || ts_node_is_null(right)) return;
    TSNode obj = ts_node_child_by_field_id(left, syn_.f_object);
    if (NodeText(obj, src_) != "self") return;
    std::string attr(NodeText(ts_node_child_by_field_id(left, syn_.f_attribute), src_));
    if (syn_.Kind(right) == NodeKind::kCall) {
      std::string callee = DottedText(syn_, ts_node_child_by_field_id(right, syn_.f_function), src_);
      if (!callee.empty()) info.attr_exprs.push_back({attr, {AttrExpr::Kind::kCall, callee}});
    } else {
      std::string d = DottedText(syn_, right, src_);
      if (!d.empty() && d.rfind("self.", 0) != 0) info.attr_exprs.push_back({attr, {AttrExpr::Kind::kDotted, d}});
    }
  }

  void RegisterBuffer(TSNode n, ClassInfo& info) {
    TSNode fn = ts_node_child_by_field_id(n, syn_.f_function);
    if (NodeText(fn, src_) != "self.register_buffer") return;
    TSNode args = ts_node_child_by_field_id(n, syn_.f_arguments);
    std::string name;
    if (!ts_node_is_null(args) && ts_node_named_child_count(args) > 0 &&
        StringLiteralValue(syn_, ts_node_named_child(args, 0), src_, &name))
      info.attr_exprs.push_back({name, {AttrExpr::Kind::kTensor, {}}});
  }

  void Assignment(TSNode n) {
    TSNode left = ts_node_child_by_field_id(n, syn_.f_left);
    TSNode right = ts_node_child_by_field_id(n, syn_.f_right);
    if (syn_.Kind(left) != NodeKind::kIdentifier || ts_node_is_null(right)) return;
    std::string name(NodeText(left, src_));
    if (name == "__all__") {
      out_.all = std::vector<std::string>();
      AllList(right);
      return;
    }
    TopBinding b;
    if (syn_.Kind(right) == NodeKind::kCall) {
      b.dotted = DottedText(syn_, ts_node_child_by_field_id(right, syn_.f_function), src_);
      b.kind = b.dotted.empty() ? TopBinding::Kind::kOther : TopBinding::Kind::kAssignCall;
    } else {
      b.dotted = DottedText(syn_, right, src_);
      b.kind = b.dotted.empty() ? TopBinding::Kind::kOther : TopBinding::Kind::kAssignDotted;
    }
    out_.names[name] = b;
  }

  void AugAll(TSNode n) {
    TSNode left = ts_node_child_by_field_id(n, syn_.f_left);
    if (NodeText(left, src_) != "__all__") return;
    if (!out_.all) out_.all = std::vector<std::string>();
    AllList(ts_node_child_by_field_id(n, syn_.f_right));
  }

  void AllList(TSNode list) {
    if (ts_node_is_null(list)) return;
    NodeKind k = syn_.Kind(list);
    if (k != NodeKind::kList && k != NodeKind::kTuple) return;
    for (TSNode item : NamedChildren(list)) {
      std::string s;
      if (StringLiteralValue(syn_, item, src_, &s)) out_.all->push_back(s);
    }
  }

  const PySyntax& syn_;
  std::string_view src_;
  ModuleSummary& out_;
};

}  // namespace

std::string DottedText(const PySyntax& syn, TSNode n, std::string_view src) {
  // Iterative: attribute chains can be thousands deep in generated or hostile input.
  std::vector<std::string_view> parts;
  while (!ts_node_is_null(n) && syn.Kind(n) == NodeKind::kAttribute) {
    parts.push_back(NodeText(ts_node_child_by_field_id(n, syn.f_attribute), src));
    n = ts_node_child_by_field_id(n, syn.f_object);
    if (parts.size() > 256) return {};
  }
  if (ts_node_is_null(n) || syn.Kind(n) != NodeKind::kIdentifier) return {};
  std::string out(NodeText(n, src));
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    out.push_back('.');
    out.append(*it);
  }
  return out;
}

std::string ResolveRelativeModule(const std::string& from_module, bool from_is_package, int level,
                                  const std::string& module) {
  if (level == 0) return module;
  std::string base = from_module;
  int climb = from_is_package ? level - 1 : level;
  for (int i = 0; i < climb; ++i) {
    size_t dot = base.rfind('.');
    if (dot == std::string::npos) {
      if (base.empty()) return {};
      base.clear();
    } else {
      base.resize(dot);
    }
  }
  if (module.empty()) return base;
  return base.empty() ? module : base + "." + module;
}

ModuleSummary SummariseModule(const PySyntax& syn, const ParsedSource& src, std::string module_name, bool is_package) {
  ModuleSummary out;
  out.module_name = std::move(module_name);
  out.is_package = is_package;
  if (src.tree) Summariser(syn, src.source, out).Block(src.root());
  return out;
}

}  // namespace portkit::analyse
