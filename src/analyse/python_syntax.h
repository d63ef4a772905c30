#pragma once
/// The tree-sitter Python front end: parsing, and a dense table from grammar symbols to the node
/// kinds the analyser handles, so the walkers dispatch with one array lookup per node.
#include <tree_sitter/api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

extern "C" const TSLanguage* tree_sitter_python();

namespace portkit::analyse {

enum class NodeKind : uint8_t {
  kOther = 0,
  kModule,
  kBlock,
  kExpressionStatement,
  kImportStatement,
  kImportFromStatement,
  kFutureImportStatement,
  kAliasedImport,
  kDottedName,
  kRelativeImport,
  kImportPrefix,
  kWildcardImport,
  kFunctionDefinition,
  kClassDefinition,
  kDecoratedDefinition,
  kDecorator,
  kAssignment,
  kAugmentedAssignment,
  kCall,
  kAttribute,
  kIdentifier,
  kSubscript,
  kString,
  kConcatenatedString,
  kStringContent,
  kArgumentList,
  kKeywordArgument,
  kGeneratorExpression,
  kForStatement,
  kWithStatement,
  kWithClause,
  kWithItem,
  kAsPattern,
  kAsPatternTarget,
  kIfStatement,
  kWhileStatement,
  kTryStatement,
  kExceptClause,
  kGlobalStatement,
  kNonlocalStatement,
  kLambda,
  kParameters,
  kLambdaParameters,
  kTypedParameter,
  kDefaultParameter,
  kTypedDefaultParameter,
  kListSplatPattern,
  kDictionarySplatPattern,
  kBinaryOperator,
  kUnaryOperator,
  kParenthesizedExpression,
  kNamedExpression,
  kType,
  kPatternList,
  kTuplePattern,
  kListPattern,
  kTuple,
  kList,
  kExpressionList,
  kListComprehension,
  kSetComprehension,
  kDictionaryComprehension,
  kForInClause,
  kConditionalExpression,
  kComment,
  kListSplat,
  kDictionarySplat,
  kReturnStatement,
  kInteger,
  kFloat,
  kTrue,
  kFalse,
  kNone,
  kDictionary,
  kSet,
  kAwait,
  kBooleanOperator,
  kComparisonOperator,
  kNotOperator,
  kElseClause,
  kElifClause,
  kFinallyClause,
  kCount
};

/// Symbol and field tables of the Python grammar; built once, shared read-only across threads.
class PySyntax {
 public:
  PySyntax();
  NodeKind Kind(TSNode n) const {
    if (ts_node_is_null(n)) return NodeKind::kOther;
    TSSymbol s = ts_node_symbol(n);
    return s < kinds_.size() ? kinds_[s] : NodeKind::kOther;
  }
  const TSLanguage* language() const { return language_; }

  TSFieldId f_name, f_alias, f_module_name, f_function, f_arguments, f_object, f_attribute, f_left, f_right, f_value,
      f_type, f_body, f_parameters, f_superclasses, f_definition, f_subscript, f_argument, f_alternative, f_condition,
      f_consequence, f_return_type;

 private:
  const TSLanguage* language_;
  std::vector<NodeKind> kinds_;
};

/// CPython's own limits on nesting (its tokenizer's MAXLEVEL and MAXINDENT): no valid Python goes
/// past them, and tree-sitter's error recovery on input far past them is where it breaks (an
/// ASan invalid free inside libtree-sitter on 80,000 nested brackets), so such a file is refused
/// before it is parsed.
inline constexpr uint32_t kMaxBracketDepth = 200;
inline constexpr uint32_t kMaxIndentLevels = 100;

/// Where a source first goes past kMaxBracketDepth or kMaxIndentLevels.
struct NestingProblem {
  uint32_t line = 0, col = 0;  ///< 1-based, column in bytes; line 0: none
  std::string what;            ///< "brackets nested more than 200 deep (CPython refuses this too)"
};

/// Scans `source` as CPython's tokenizer counts nesting (strings and comments skipped, a
/// backslash-newline or an open bracket continues a line, a tab advances to the next multiple of
/// 8, a form feed resets the column); one linear pass, no allocation but the indentation stack.
NestingProblem CheckNesting(std::string_view source);

/// The UTF-8 byte order mark CPython accepts at the start of a source file.
inline constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
inline bool StartsWithBom(std::string_view s) { return s.substr(0, 3) == kUtf8Bom; }

/// A parsed file: owns the source bytes (exactly the file's: a BOM is kept, and left out of the
/// parse) and the tree.
struct ParsedSource {
  std::string source;
  TSTree* tree = nullptr;
  /// 1-based location of the first syntax error (ERROR or MISSING node), 0 when none.
  uint32_t error_line = 0, error_col = 0;
  std::string error_what;
  /// Why the file was not parsed at all (no tree): "brackets nested more than 200 deep ..." at
  /// error_line:error_col. Empty when it was parsed (or tree-sitter gave up).
  std::string refused;

  ParsedSource() = default;
  ParsedSource(ParsedSource&& o) noexcept;
  ParsedSource& operator=(ParsedSource&& o) noexcept;
  ParsedSource(const ParsedSource&) = delete;
  ~ParsedSource();
  TSNode root() const { return ts_tree_root_node(tree); }
  bool has_error() const { return error_line != 0; }
};

/// One parser per thread (TSParser is not thread-safe).
class PythonParser {
 public:
  PythonParser();
  ~PythonParser();
  PythonParser(const PythonParser&) = delete;
  PythonParser& operator=(const PythonParser&) = delete;
  /// Parses `source` (UTF-8; a leading BOM is kept in the text and excluded from the parse, so
  /// byte offsets are the file's own). Never fails on bad syntax: the tree then holds ERROR nodes
  /// and the first one is recorded. Returns a tree-less result when CheckNesting refuses the
  /// source (`refused` says why) or tree-sitter gives up. `nesting_checked`: the source passed
  /// CheckNesting before (a file parsed again for a later pass), so the check is not repeated.
  ParsedSource Parse(std::string source, bool nesting_checked = false);

 private:
  TSParser* parser_;
};

inline std::string_view NodeText(TSNode n, std::string_view src) {
  uint32_t b = ts_node_start_byte(n), e = ts_node_end_byte(n);
  if (e > src.size() || b > e) return {};
  return src.substr(b, e - b);
}
inline uint32_t StartLine(TSNode n) { return ts_node_start_point(n).row + 1; }
inline uint32_t EndLine(TSNode n) { return ts_node_end_point(n).row + 1; }
/// 1-based column in bytes.
inline uint32_t StartCol(TSNode n) { return ts_node_start_point(n).column + 1; }
inline uint32_t EndCol(TSNode n) { return ts_node_end_point(n).column + 1; }

/// Visits the named nodes of the subtree of `root` depth-first, in source order, without
/// recursion (any nesting depth is safe). `visit(node)` returns whether to enter its children.
template <typename Visit>
void ForEachNamedNode(TSNode root, Visit visit) {
  TSTreeCursor cursor = ts_tree_cursor_new(root);
  bool descend = visit(root);
  for (;;) {
    if (descend && ts_tree_cursor_goto_first_child(&cursor)) {
      TSNode n = ts_tree_cursor_current_node(&cursor);
      descend = ts_node_is_named(n) ? visit(n) : true;
      continue;
    }
    for (;;) {
      if (ts_tree_cursor_goto_next_sibling(&cursor)) {
        TSNode n = ts_tree_cursor_current_node(&cursor);
        descend = ts_node_is_named(n) ? visit(n) : true;
        break;
      }
      if (!ts_tree_cursor_goto_parent(&cursor)) {
        ts_tree_cursor_delete(&cursor);
        return;
      }
    }
  }
}

/// The named children of `n`, gathered with a cursor (tree-sitter's indexed and sibling access
/// are linear per call, and may skip zero-width nodes).
std::vector<TSNode> NamedChildren(TSNode n);

/// The string value of a simple string literal (no interpolation), without quotes/prefix.
/// Returns false for f-strings with interpolations or anything that is not a plain string.
bool StringLiteralValue(const PySyntax& syn, TSNode n, std::string_view src, std::string* out);

}  // namespace portkit::analyse
