// Helpers of the affinity pattern rules (no rule here): what a name was last bound to in its
// function, whether an expression is a bool mask, a scalar or a transposed operand, and whether
// rebinding a name instead of mutating its object in place keeps a function's meaning.
#include <array>
#include <cctype>

#include "analyse/rules/affinity_apis/rules.h"

namespace portkit::analyse::affinity {
namespace {

// Guards against pathological chains `a = b; b = c; ...` when following bindings.
constexpr int kMaxBindingDepth = 4;

bool IsScopeNode(NodeKind k) {
  return k == NodeKind::kFunctionDefinition || k == NodeKind::kLambda || k == NodeKind::kClassDefinition ||
         k == NodeKind::kModule;
}

TSNode SkipParens(const PySyntax& syn, TSNode n) {
  while (!ts_node_is_null(n) && syn.Kind(n) == NodeKind::kParenthesizedExpression && ts_node_named_child_count(n) == 1)
    n = ts_node_named_child(n, 0);
  return n;
}

std::string_view CalleeText(const PySyntax& syn, TSNode call, std::string_view src) {
  return NodeText(ts_node_child_by_field_id(call, syn.f_function), src);
}

// The last component of a dotted callee ("torch.isnan" → "isnan", "x.eq" → "eq").
std::string_view LastName(std::string_view dotted) {
  size_t dot = dotted.rfind('.');
  return dot == std::string_view::npos ? dotted : dotted.substr(dot + 1);
}

bool OneOf(std::string_view s, std::initializer_list<std::string_view> names) {
  for (auto n : names)
    if (s == n) return true;
  return false;
}

// Whether `n` (an expression inside `scope`) is inside a nested function, lambda or class.
bool InNestedScope(const PySyntax& syn, TSNode n, TSNode scope) {
  for (TSNode p = ts_node_parent(n); !ts_node_is_null(p) && !ts_node_eq(p, scope); p = ts_node_parent(p))
    if (IsScopeNode(syn.Kind(p))) return true;
  return false;
}

// Whether `inner` lies inside `outer` (byte ranges).
bool Within(TSNode inner, TSNode outer) {
  return ts_node_start_byte(inner) >= ts_node_start_byte(outer) && ts_node_end_byte(inner) <= ts_node_end_byte(outer);
}

// Integer literal text with optional sign equal to `v`.
bool IsIntLiteral(const PySyntax& syn, TSNode n, std::string_view src, int v) {
  n = SkipParens(syn, n);
  std::string text;
  for (char c : NodeText(n, src))
    if (c != ' ') text += c;
  return text == std::to_string(v);
}

}  // namespace

TSNode EnclosingScope(const PySyntax& syn, TSNode n) {
  for (TSNode p = ts_node_parent(n); !ts_node_is_null(p); p = ts_node_parent(p))
    if (IsScopeNode(syn.Kind(p))) return p;
  return {};
}

TSNode PreviousBinding(const PySyntax& syn, std::string_view src, TSNode scope, std::string_view name,
                       uint32_t before_byte) {
  TSNode found{};
  if (ts_node_is_null(scope)) return found;
  ForEachNamedNode(scope, [&](TSNode c) {
    if (ts_node_start_byte(c) >= before_byte) return false;
    NodeKind k = syn.Kind(c);
    if (!ts_node_eq(c, scope) && IsScopeNode(k)) return false;
    if (k == NodeKind::kAssignment) {
      TSNode left = ts_node_child_by_field_id(c, syn.f_left);
      TSNode right = ts_node_child_by_field_id(c, syn.f_right);
      if (syn.Kind(left) == NodeKind::kIdentifier && NodeText(left, src) == name && !ts_node_is_null(right) &&
          ts_node_end_byte(c) <= before_byte)
        found = right;
    }
    return true;
  });
  return found;
}

bool IsTransposedLastTwo(const PySyntax& syn, TSNode n, std::string_view src) {
  n = SkipParens(syn, n);
  if (syn.Kind(n) == NodeKind::kAttribute) return NodeText(ts_node_child_by_field_id(n, syn.f_attribute), src) == "mT";
  if (syn.Kind(n) != NodeKind::kCall) return false;
  std::string_view fn = CalleeText(syn, n, src);
  if (LastName(fn) != "transpose") return false;
  std::vector<TSNode> args = NamedChildren(ts_node_child_by_field_id(n, syn.f_arguments));
  // x.transpose(-2, -1) or torch.transpose(x, -2, -1), in either order of the two dimensions.
  size_t first = args.size() == 3 ? 1 : 0;
  if (args.size() != first + 2) return false;
  return (IsIntLiteral(syn, args[first], src, -2) && IsIntLiteral(syn, args[first + 1], src, -1)) ||
         (IsIntLiteral(syn, args[first], src, -1) && IsIntLiteral(syn, args[first + 1], src, -2));
}

bool IsBoolMask(const PySyntax& syn, TSNode n, std::string_view src, int depth) {
  n = SkipParens(syn, n);
  if (ts_node_is_null(n) || depth > kMaxBindingDepth) return false;
  switch (syn.Kind(n)) {
    case NodeKind::kComparisonOperator: {
      // `a is None`, `a in b` are Python bools, not element-wise masks.
      std::string_view text = NodeText(n, src);
      return text.find(" is ") == std::string_view::npos && text.find(" in ") == std::string_view::npos;
    }
    case NodeKind::kUnaryOperator:
      return OperatorOf(n, src) == "~" && IsBoolMask(syn, ts_node_child_by_field_id(n, syn.f_argument), src, depth);
    case NodeKind::kBinaryOperator: {
      std::string_view op = OperatorOf(n, src);
      if (op != "&" && op != "|" && op != "^") return false;
      return IsBoolMask(syn, ts_node_child_by_field_id(n, syn.f_left), src, depth) &&
             IsBoolMask(syn, ts_node_child_by_field_id(n, syn.f_right), src, depth);
    }
    case NodeKind::kCall:
      return OneOf(LastName(CalleeText(syn, n, src)),
                   {"isnan", "isinf", "isfinite", "isneginf", "isposinf", "logical_and", "logical_or", "logical_not",
                    "logical_xor", "eq", "ne", "lt", "le", "gt", "ge"});
    case NodeKind::kIdentifier: {
      TSNode bound = PreviousBinding(syn, src, EnclosingScope(syn, n), NodeText(n, src), ts_node_start_byte(n));
      return IsBoolMask(syn, bound, src, depth + 1);
    }
    default: return false;
  }
}

bool IsScalar(const PySyntax& syn, TSNode n, std::string_view src, int depth) {
  n = SkipParens(syn, n);
  if (ts_node_is_null(n) || depth > kMaxBindingDepth) return false;
  switch (syn.Kind(n)) {
    case NodeKind::kInteger:
    case NodeKind::kFloat:
    case NodeKind::kTrue:
    case NodeKind::kFalse: return true;
    case NodeKind::kUnaryOperator:
      return OperatorOf(n, src) != "~" && IsScalar(syn, ts_node_child_by_field_id(n, syn.f_argument), src, depth);
    case NodeKind::kCall: {
      // float("inf"), float("-inf"), int(3)
      std::string_view fn = CalleeText(syn, n, src);
      if (fn != "float" && fn != "int") return false;
      std::vector<TSNode> args = NamedChildren(ts_node_child_by_field_id(n, syn.f_arguments));
      return args.size() == 1 && (syn.Kind(args[0]) == NodeKind::kString || IsScalar(syn, args[0], src, depth));
    }
    case NodeKind::kAttribute: {
      std::string_view text = NodeText(n, src);
      return OneOf(
          text, {"math.inf", "math.pi", "math.e", "math.nan", "np.inf", "np.nan", "numpy.inf", "numpy.nan", "np.pi"});
    }
    case NodeKind::kIdentifier: {
      TSNode bound = PreviousBinding(syn, src, EnclosingScope(syn, n), NodeText(n, src), ts_node_start_byte(n));
      return IsScalar(syn, bound, src, depth + 1);
    }
    default: return false;
  }
}

bool IsFreshTensor(const PySyntax& syn, TSNode n, std::string_view src) {
  n = SkipParens(syn, n);
  switch (syn.Kind(n)) {
    case NodeKind::kBinaryOperator: return true;  // arithmetic makes a new tensor
    case NodeKind::kCall: {
      if (OneOf(LastName(CalleeText(syn, n, src)),
                {"clone",      "zeros",  "ones",       "empty",     "full",       "rand",      "randn",
                 "randint",    "tensor", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
                 "randn_like", "arange", "linspace",   "cat",       "stack",      "where"}))
        return true;
      // A method of a fresh temporary (`torch.randn(4).to(dev)`, `(a + b).view(-1)`): even when
      // it returns its receiver or a view of it, nothing else refers to that storage.
      TSNode fn = ts_node_child_by_field_id(n, syn.f_function);
      return syn.Kind(fn) == NodeKind::kAttribute &&
             IsFreshTensor(syn, ts_node_child_by_field_id(fn, syn.f_object), src);
    }
    default: return false;
  }
}

namespace {

// `x[...] = v` or `x[...] += v` (`subscript` is `x[...]`): another in-place write of the object.
bool IsSubscriptWrite(const PySyntax& syn, TSNode subscript) {
  TSNode gp = ts_node_parent(subscript);
  return (syn.Kind(gp) == NodeKind::kAssignment || syn.Kind(gp) == NodeKind::kAugmentedAssignment) &&
         ts_node_eq(ts_node_child_by_field_id(gp, syn.f_left), subscript);
}

// `x.attr` or `x.method(...)` (`attribute` is `x.attr`): a property read (`x.shape`, `x.is_cuda`)
// keeps no reference, except the view properties; nor do the methods returning a new value.
bool AttributeKeepsNoReference(const PySyntax& syn, std::string_view src, TSNode attribute) {
  std::string_view attr = NodeText(ts_node_child_by_field_id(attribute, syn.f_attribute), src);
  TSNode gp = ts_node_parent(attribute);
  bool called = syn.Kind(gp) == NodeKind::kCall && ts_node_eq(ts_node_child_by_field_id(gp, syn.f_function), attribute);
  if (!called) return !OneOf(attr, {"T", "mT", "H", "mH", "data", "real", "imag", "grad"});
  return OneOf(attr, {"size", "dim", "numel", "sum", "mean", "item", "tolist", "any", "all", "abs", "norm", "max",
                      "min", "clone", "std", "var"});
}

// An argument of a call (`arguments` is its argument list): torch functions keep no reference to
// their arguments; only those returning a view (or a list of views) of an argument could let
// another name see the object.
bool ArgumentKeepsNoReference(const PySyntax& syn, std::string_view src, TSNode arguments) {
  TSNode call = ts_node_parent(arguments);
  std::string_view callee = CalleeText(syn, call, src);
  if (OneOf(callee, {"print", "len", "isinstance"})) return true;
  return (callee.starts_with("torch.") || callee.starts_with("F.")) &&
         !OneOf(LastName(callee),
                {"reshape",    "flatten",      "squeeze",    "unsqueeze",    "narrow",          "select",
                 "t",          "transpose",    "permute",    "movedim",      "unbind",          "split",
                 "chunk",      "tensor_split", "as_strided", "view_as_real", "view_as_complex", "diagonal",
                 "swapaxes",   "swapdims",     "unflatten",  "expand",       "broadcast_to",    "atleast_1d",
                 "atleast_2d", "atleast_3d",   "hsplit",     "vsplit",       "dsplit",          "detach",
                 "real",       "imag"});
}

// Whether a use `c` of the name before the statement (or in the same loop) cannot keep a
// reference to the object. Bound again (`x = ...`), the name no longer refers to the object we
// are proving things about; any use not listed here may keep a reference.
bool UseKeepsNoReference(const PySyntax& syn, std::string_view src, TSNode c) {
  TSNode parent = ts_node_parent(c);
  switch (syn.Kind(parent)) {
    case NodeKind::kComparisonOperator:
    case NodeKind::kBinaryOperator:
    case NodeKind::kAugmentedAssignment: return true;
    case NodeKind::kSubscript:
      // x[...] = v (another in-place write of the fresh object) is fine; a read x[i] may be a view.
      return ts_node_eq(ts_node_child_by_field_id(parent, syn.f_value), c) && IsSubscriptWrite(syn, parent);
    case NodeKind::kAttribute:
      return ts_node_eq(ts_node_child_by_field_id(parent, syn.f_object), c) &&
             AttributeKeepsNoReference(syn, src, parent);
    case NodeKind::kArgumentList: return ArgumentKeepsNoReference(syn, src, parent);
    default: return false;
  }
}

// The walk of RebindKeepsMeaning over the function: every use of the name must be one that the
// rebinding cannot change the meaning of.
class RebindCheck {
 public:
  RebindCheck(const PySyntax& syn, std::string_view src, TSNode scope, TSNode statement, TSNode binding,
              std::string_view name)
      : syn_(syn), src_(src), scope_(scope), statement_(statement), binding_(binding), name_(name) {
    // The outermost loop around the statement inside the function: a use anywhere in it may run
    // after the statement.
    for (TSNode p = ts_node_parent(statement); !ts_node_is_null(p) && !ts_node_eq(p, scope); p = ts_node_parent(p))
      if (syn.Kind(p) == NodeKind::kForStatement || syn.Kind(p) == NodeKind::kWhileStatement) loop_ = p;
  }

  bool safe() const { return safe_; }

  // Whether the walk enters `c`'s children.
  bool Visit(TSNode c) {
    if (!safe_) return false;
    NodeKind k = syn_.Kind(c);
    if (k == NodeKind::kGlobalStatement || k == NodeKind::kNonlocalStatement) {
      if (NodeText(c, src_).find(name_) != std::string_view::npos) safe_ = false;
      return false;
    }
    if (k == NodeKind::kParameters) {
      for (TSNode p : NamedChildren(c))
        if (NodeText(p, src_) == name_) safe_ = false;
      return false;
    }
    if (k != NodeKind::kIdentifier || NodeText(c, src_) != name_) return true;
    if (Within(c, statement_) || Within(c, binding_)) return true;
    if (!InNestedScope(syn_, c, scope_)) {  // a closure sees the object, not the new binding
      bool after = ts_node_start_byte(c) >= ts_node_end_byte(statement_);
      if (after && (ts_node_is_null(loop_) || !Within(c, loop_))) return true;  // sees the new value
      // Before the statement (or in the same loop): only uses that cannot keep a reference.
      if (UseKeepsNoReference(syn_, src_, c)) return true;
    }
    safe_ = false;
    return false;
  }

 private:
  const PySyntax& syn_;
  std::string_view src_;
  TSNode scope_, statement_, binding_;
  TSNode loop_{};
  std::string_view name_;
  bool safe_ = true;
};

}  // namespace

bool RebindKeepsMeaning(const PySyntax& syn, std::string_view src, TSNode statement, std::string_view name) {
  TSNode scope = EnclosingScope(syn, statement);
  if (ts_node_is_null(scope) || syn.Kind(scope) != NodeKind::kFunctionDefinition) return false;
  // The object must be made inside this function by something that returns a new tensor, so
  // that no caller, attribute or other name can hold it.
  TSNode bound = PreviousBinding(syn, src, scope, name, ts_node_start_byte(statement));
  if (ts_node_is_null(bound) || !IsFreshTensor(syn, bound, src)) return false;
  RebindCheck check(syn, src, scope, statement, ts_node_parent(bound), name);
  ForEachNamedNode(scope, [&](TSNode c) { return check.Visit(c); });
  return check.safe();
}

namespace {
// Code text only: a comment ("# the fused path is slower here") names no path.
bool MentionsAny(std::string_view text, std::initializer_list<std::string_view> tokens) {
  std::string lower;
  lower.reserve(text.size());
  char quote = 0;
  bool comment = false;
  for (char c : text) {
    if (c == '\n') comment = false, quote = 0;
    else if (comment) continue;
    else if (quote) quote = c == quote ? 0 : quote;
    else if (c == '"' || c == '\'') quote = c;
    else if (c == '#') {
      comment = true;
      continue;
    }
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  for (std::string_view t : tokens)
    if (lower.find(t) != std::string::npos) return true;
  return false;
}
}  // namespace

bool InFallbackOfFused(const PySyntax& syn, std::string_view src, TSNode n,
                       std::initializer_list<std::string_view> fused_tokens) {
  TSNode child = n;
  for (TSNode p = ts_node_parent(n); !ts_node_is_null(p); child = p, p = ts_node_parent(p)) {
    NodeKind k = syn.Kind(p);
    if (k == NodeKind::kFunctionDefinition || k == NodeKind::kClassDefinition || k == NodeKind::kLambda) break;
    if (k == NodeKind::kElseClause || k == NodeKind::kElifClause) {
      // The owning `if` from its start up to this branch: its condition and the branches before.
      TSNode owner = ts_node_parent(p);
      if (ts_node_is_null(owner)) continue;
      std::string_view before(src.data() + ts_node_start_byte(owner),
                              ts_node_start_byte(p) - ts_node_start_byte(owner));
      if (MentionsAny(before, fused_tokens)) return true;
    } else if (k == NodeKind::kIfStatement) {
      TSNode consequence = ts_node_child_by_field_id(p, syn.f_consequence);
      TSNode condition = ts_node_child_by_field_id(p, syn.f_condition);
      if (ts_node_eq(child, consequence) && syn.Kind(condition) == NodeKind::kNotOperator &&
          MentionsAny(NodeText(condition, src), fused_tokens))
        return true;
    } else if (k == NodeKind::kConditionalExpression) {
      // `a if cond else b`: named children a, cond, b.
      if (ts_node_named_child_count(p) == 3 && ts_node_eq(child, ts_node_named_child(p, 2))) {
        std::string_view before(src.data() + ts_node_start_byte(p), ts_node_start_byte(child) - ts_node_start_byte(p));
        if (MentionsAny(before, fused_tokens)) return true;
      }
    }
  }
  return false;
}

}  // namespace portkit::analyse::affinity
