#include "analyse/python_syntax.h"

#include <cctype>
#include <cstring>
#include <unordered_map>

namespace portkit::analyse {

PySyntax::PySyntax() : language_(tree_sitter_python()) {
  static constexpr std::pair<const char*, NodeKind> kNames[] = {
      {"module", NodeKind::kModule},
      {"block", NodeKind::kBlock},
      {"expression_statement", NodeKind::kExpressionStatement},
      {"import_statement", NodeKind::kImportStatement},
      {"import_from_statement", NodeKind::kImportFromStatement},
      {"future_import_statement", NodeKind::kFutureImportStatement},
      {"aliased_import", NodeKind::kAliasedImport},
      {"dotted_name", NodeKind::kDottedName},
      {"relative_import", NodeKind::kRelativeImport},
      {"import_prefix", NodeKind::kImportPrefix},
      {"wildcard_import", NodeKind::kWildcardImport},
      {"function_definition", NodeKind::kFunctionDefinition},
      {"class_definition", NodeKind::kClassDefinition},
      {"decorated_definition", NodeKind::kDecoratedDefinition},
      {"decorator", NodeKind::kDecorator},
      {"assignment", NodeKind::kAssignment},
      {"augmented_assignment", NodeKind::kAugmentedAssignment},
      {"call", NodeKind::kCall},
      {"attribute", NodeKind::kAttribute},
      {"identifier", NodeKind::kIdentifier},
      {"subscript", NodeKind::kSubscript},
      {"string", NodeKind::kString},
      {"concatenated_string", NodeKind::kConcatenatedString},
      {"string_content", NodeKind::kStringContent},
      {"argument_list", NodeKind::kArgumentList},
      {"keyword_argument", NodeKind::kKeywordArgument},
      {"generator_expression", NodeKind::kGeneratorExpression},
      {"for_statement", NodeKind::kForStatement},
      {"with_statement", NodeKind::kWithStatement},
      {"with_clause", NodeKind::kWithClause},
      {"with_item", NodeKind::kWithItem},
      {"as_pattern", NodeKind::kAsPattern},
      {"as_pattern_target", NodeKind::kAsPatternTarget},
      {"if_statement", NodeKind::kIfStatement},
      {"while_statement", NodeKind::kWhileStatement},
      {"try_statement", NodeKind::kTryStatement},
      {"except_clause", NodeKind::kExceptClause},
      {"global_statement", NodeKind::kGlobalStatement},
      {"nonlocal_statement", NodeKind::kNonlocalStatement},
      {"lambda", NodeKind::kLambda},
      {"parameters", NodeKind::kParameters},
      {"lambda_parameters", NodeKind::kLambdaParameters},
      {"typed_parameter", NodeKind::kTypedParameter},
      {"default_parameter", NodeKind::kDefaultParameter},
      {"typed_default_parameter", NodeKind::kTypedDefaultParameter},
      {"list_splat_pattern", NodeKind::kListSplatPattern},
      {"dictionary_splat_pattern", NodeKind::kDictionarySplatPattern},
      {"binary_operator", NodeKind::kBinaryOperator},
      {"unary_operator", NodeKind::kUnaryOperator},
      {"parenthesized_expression", NodeKind::kParenthesizedExpression},
      {"named_expression", NodeKind::kNamedExpression},
      {"type", NodeKind::kType},
      {"pattern_list", NodeKind::kPatternList},
      {"tuple_pattern", NodeKind::kTuplePattern},
      {"list_pattern", NodeKind::kListPattern},
      {"tuple", NodeKind::kTuple},
      {"list", NodeKind::kList},
      {"expression_list", NodeKind::kExpressionList},
      {"list_comprehension", NodeKind::kListComprehension},
      {"set_comprehension", NodeKind::kSetComprehension},
      {"dictionary_comprehension", NodeKind::kDictionaryComprehension},
      {"for_in_clause", NodeKind::kForInClause},
      {"conditional_expression", NodeKind::kConditionalExpression},
      {"comment", NodeKind::kComment},
      {"list_splat", NodeKind::kListSplat},
      {"dictionary_splat", NodeKind::kDictionarySplat},
      {"return_statement", NodeKind::kReturnStatement},
      {"integer", NodeKind::kInteger},
      {"float", NodeKind::kFloat},
      {"true", NodeKind::kTrue},
      {"false", NodeKind::kFalse},
      {"none", NodeKind::kNone},
      {"dictionary", NodeKind::kDictionary},
      {"set", NodeKind::kSet},
      {"await", NodeKind::kAwait},
      {"boolean_operator", NodeKind::kBooleanOperator},
      {"comparison_operator", NodeKind::kComparisonOperator},
      {"not_operator", NodeKind::kNotOperator},
      {"else_clause", NodeKind::kElseClause},
      {"elif_clause", NodeKind::kElifClause},
      {"finally_clause", NodeKind::kFinallyClause},
  };
  std::unordered_map<std::string, NodeKind> by_name;
  for (const auto& [name, kind] : kNames) by_name.emplace(name, kind);
  uint32_t count = ts_language_symbol_count(language_);
  kinds_.assign(count, NodeKind::kOther);
  for (uint32_t s = 0; s < count; ++s) {
    if (ts_language_symbol_type(language_, static_cast<TSSymbol>(s)) != TSSymbolTypeRegular) continue;
    auto it = by_name.find(ts_language_symbol_name(language_, static_cast<TSSymbol>(s)));
    if (it != by_name.end()) kinds_[s] = it->second;
  }
  auto field = [&](const char* name) {
    return ts_language_field_id_for_name(language_, name, static_cast<uint32_t>(std::strlen(name)));
  };
  f_name = field("name");
  f_alias = field("alias");
  f_module_name = field("module_name");
  f_function = field("function");
  f_arguments = field("arguments");
  f_object = field("object");
  f_attribute = field("attribute");
  f_left = field("left");
  f_right = field("right");
  f_value = field("value");
  f_type = field("type");
  f_body = field("body");
  f_parameters = field("parameters");
  f_superclasses = field("superclasses");
  f_definition = field("definition");
  f_subscript = field("subscript");
  f_argument = field("argument");
  f_alternative = field("alternative");
  f_condition = field("condition");
  f_consequence = field("consequence");
  f_return_type = field("return_type");
}

ParsedSource::ParsedSource(ParsedSource&& o) noexcept
    : source(std::move(o.source)),
      tree(o.tree),
      error_line(o.error_line),
      error_col(o.error_col),
      error_what(std::move(o.error_what)),
      refused(std::move(o.refused)) {
  o.tree = nullptr;
}

ParsedSource& ParsedSource::operator=(ParsedSource&& o) noexcept {
  if (this != &o) {
    if (tree) ts_tree_delete(tree);
    source = std::move(o.source);
    tree = o.tree;
    o.tree = nullptr;
    error_line = o.error_line;
    error_col = o.error_col;
    error_what = std::move(o.error_what);
    refused = std::move(o.refused);
  }
  return *this;
}

ParsedSource::~ParsedSource() {
  if (tree) ts_tree_delete(tree);
}

PythonParser::PythonParser() : parser_(ts_parser_new()) { ts_parser_set_language(parser_, tree_sitter_python()); }

PythonParser::~PythonParser() { ts_parser_delete(parser_); }

namespace {

bool IsErrorNode(TSNode n) { return ts_node_is_missing(n) || std::strcmp(ts_node_type(n), "ERROR") == 0; }

// Descends to the first ERROR or MISSING node, entering only children that contain one; a loop,
// so deeply nested input cannot overflow the stack.
bool FindFirstError(TSNode n, TSNode* out) {
  for (;;) {
    if (IsErrorNode(n)) {
      *out = n;
      return true;
    }
    if (!ts_node_has_error(n)) return false;
    TSNode next{};
    bool found = false;
    TSTreeCursor cursor = ts_tree_cursor_new(n);
    if (ts_tree_cursor_goto_first_child(&cursor)) {
      do {
        TSNode c = ts_tree_cursor_current_node(&cursor);
        if (IsErrorNode(c) || ts_node_has_error(c)) {
          next = c;
          found = true;
          break;
        }
      } while (ts_tree_cursor_goto_next_sibling(&cursor));
    }
    ts_tree_cursor_delete(&cursor);
    if (!found) {
      *out = n;
      return true;
    }
    n = next;
  }
}

}  // namespace

namespace {

// The end of the string literal that starts with the quote at `i` (one past its closing quote,
// or the line end of an unterminated one-line string). `newline(at)` is told of each line end
// inside it.
template <typename OnNewline>
size_t SkipString(std::string_view s, size_t i, OnNewline newline) {
  const char q = s[i];
  const size_t n = s.size();
  const bool triple = i + 2 < n && s[i + 1] == q && s[i + 2] == q;
  size_t j = i + (triple ? 3 : 1);
  while (j < n) {
    char c = s[j];
    if (c == '\\') {
      // An escaped line end continues the string on the next line (also in raw strings).
      size_t k = j + 1;
      if (k < n && s[k] == '\r') {
        k += k + 1 < n && s[k + 1] == '\n' ? 2 : 1;
        newline(k);
      } else if (k < n && s[k] == '\n') {
        ++k;
        newline(k);
      } else {
        ++k;
      }
      j = k;
      continue;
    }
    if (c == q && (!triple || (j + 2 < n && s[j + 1] == q && s[j + 2] == q))) return j + (triple ? 3 : 1);
    if (c == '\n' || c == '\r') {
      if (!triple) return j;  // unterminated: the line end is the caller's
      j += c == '\r' && j + 1 < n && s[j + 1] == '\n' ? 2 : 1;
      newline(j);
      continue;
    }
    ++j;
  }
  return n;
}

/// Operators nested without brackets (`- - - x`, `not not x`, `lambda: lambda: x`, `a if b else c
/// if d else ...`, `a ** b ** c`): each builds one more level of tree, as a bracket does, and
/// tree-sitter and the walkers recurse on them. Held to the bracket limit: no real code nests
/// operators more than a few deep (CPython 3.11 itself gives up near 3,000: RecursionError).
/// CheckNesting refuses a source past it, as it does past kMaxBracketDepth.
constexpr uint32_t kMaxOperatorNesting = 200;

/// How deep operators without brackets nest, as the parser would build them: a prefix operator
/// (`-`, `+`, `~`, `*`, `**` unpacking, `not`, `await`), a right-associative `**`, `lambda` and a
/// conditional expression's `else` each open a level that lasts until something ends its operand:
/// a binary operator ends a unary operator's and `**`'s, `and` / `or` / `if` also end `not`'s,
/// and only a separator (`,` `;` `:` `=`, a keyword starting a clause, a logical line end, a
/// closing bracket) ends `lambda`'s and `else`'s. Each bracket level starts from the depth of the
/// level around it, so `-f(-g(-x))` counts 3. Counts per level; no allocation.
class OperatorNesting {
 public:
  /// Depth reached, counting this level's open operators on top of the levels around it.
  uint32_t depth() const { return level().base + level().unary + level().negation + level().tail; }
  bool after_operand() const { return after_operand_; }

  void Operand() { after_operand_ = true; }
  /// `-x`, `~x`, `*x`, `**x`, `await x`, and `a ** b` (right-associative: `a ** b ** c` nests).
  void Unary() { ++level().unary, after_operand_ = false; }
  void Not() { ++level().negation, after_operand_ = false; }
  /// `lambda` (its parameters up to the `:` are no separators) and a conditional's `else`.
  void Tail(bool lambda) {
    if (!lambda) level().unary = level().negation = 0;
    ++level().tail;
    level().lambda_params += lambda;
    after_operand_ = false;
  }
  /// A binary operator of lower precedence than the unary ones (`+`, `*`, comparisons, `in`, ...).
  void Binary() { level().unary = 0, after_operand_ = false; }
  /// `and`, `or`, a conditional's `if`.
  void BooleanOperator() { level().unary = level().negation = 0, after_operand_ = false; }
  /// `,` `=` in lambda parameters are part of them; elsewhere they end every open operator.
  void Separator(bool inside_lambda_params_too) {
    Level& l = level();
    if (l.lambda_params > 0 && !inside_lambda_params_too) {
      after_operand_ = false;
      return;
    }
    l.unary = l.negation = l.tail = l.lambda_params = 0;
    after_operand_ = false;
  }
  /// `:` ends a lambda's parameters, else it separates.
  void Colon() {
    if (level().lambda_params > 0) {
      --level().lambda_params;
      after_operand_ = false;
      return;
    }
    Separator(true);
  }
  /// Brackets beyond the tracked levels (refused by the bracket check anyway) share the last one.
  void Open() {
    uint32_t d = depth();
    if (top_ + 1 < kLevels) levels_[++top_] = Level{d, 0, 0, 0, 0};
    else ++overflow_;
    after_operand_ = false;
  }
  void Close() {
    if (overflow_ > 0) --overflow_;
    else if (top_ > 0) --top_;
    after_operand_ = true;
  }
  void LineEnd() {
    top_ = 0, overflow_ = 0;
    levels_[0] = Level{};
    after_operand_ = false;
  }

 private:
  struct Level {
    uint32_t base = 0, unary = 0, negation = 0, tail = 0, lambda_params = 0;
  };
  static constexpr size_t kLevels = kMaxBracketDepth + 2;
  Level& level() { return levels_[top_]; }
  const Level& level() const { return levels_[top_]; }
  Level levels_[kLevels];
  size_t top_ = 0;
  uint32_t overflow_ = 0;
  bool after_operand_ = false;
};

bool IsWordByte(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return u >= 0x80 || std::isalnum(u) || c == '_';
}

/// Keywords that start or separate clauses: every open operator of the level ends there.
bool IsClauseKeyword(std::string_view w) {
  static constexpr std::string_view kWords[] = {"for",      "return", "yield",  "del",      "assert", "raise",
                                                "import",   "from",   "as",     "with",     "while",  "elif",
                                                "def",      "class",  "global", "nonlocal", "pass",   "break",
                                                "continue", "try",    "except", "finally",  "async"};
  for (std::string_view k : kWords)
    if (w == k) return true;
  return false;
}

}  // namespace

namespace {

/// What a word does to the operator nesting: `not`, `and`, `or`, `if`, `else`, `lambda`, `await`,
/// `in`, `is` and the clause keywords are operators or separators; any other word is an operand.
void ApplyWord(OperatorNesting& ops, std::string_view w) {
  if (w == "not") {
    if (ops.after_operand()) ops.Binary();  // `not in`
    else ops.Not();
  } else if (w == "and" || w == "or") {
    ops.BooleanOperator();
  } else if (w == "if") {
    if (ops.after_operand()) ops.BooleanOperator();  // a conditional expression
    else ops.Separator(true);                        // an if statement
  } else if (w == "else") {
    if (ops.after_operand()) ops.Tail(false);  // a conditional expression
    else ops.Separator(true);
  } else if (w == "lambda") {
    ops.Tail(true);
  } else if (w == "await") {
    ops.Unary();
  } else if (w == "in" || w == "is") {
    ops.Binary();
  } else if (IsClauseKeyword(w)) {
    ops.Separator(true);
  } else {
    ops.Operand();
  }
}

/// One pass of CheckNesting over a source: logical lines and their indentation, brackets, strings
/// and comments, and the operators nested between them. Each step returns false once a limit is
/// passed (then `problem_` says where).
class NestingScanner {
 public:
  explicit NestingScanner(std::string_view s) : s_(s), n_(s.size()) {}

  NestingProblem Run() {
    i_ = StartsWithBom(s_) ? kUtf8Bom.size() : 0;
    bool line_begins = true;
    while (i_ < n_) {
      if (line_begins && depth_ == 0) {
        line_begins = false;
        if (!Indentation()) return problem_;
        continue;
      }
      line_begins = false;
      if (!Token(&line_begins)) return problem_;
    }
    return problem_;
  }

 private:
  void NewLine(size_t next) {
    ++line_;
    line_start_ = next;
  }

  bool Fail(size_t at, std::string what) {
    problem_.line = line_;
    problem_.col = static_cast<uint32_t>(at - line_start_ + 1);
    problem_.what = std::move(what);
    return false;
  }

  bool OperatorsWithinLimit(size_t at) {
    if (ops_.depth() <= kMaxOperatorNesting) return true;
    return Fail(at, "operators nested more than " + std::to_string(kMaxOperatorNesting) +
                        " deep without brackets (unary -, +, ~, not, await, lambda, ** or conditional "
                        "expressions; no real code comes near)");
  }

  /// The indentation of a logical line, as CPython's tokenizer measures it.
  bool Indentation() {
    uint32_t col = 0;
    size_t j = i_;
    for (; j < n_; ++j) {
      if (s_[j] == ' ') ++col;
      else if (s_[j] == '\t') col = (col / 8 + 1) * 8;
      else if (s_[j] == '\f') col = 0;
      else break;
    }
    bool blank = j == n_ || s_[j] == '\n' || s_[j] == '\r' || s_[j] == '#';
    if (!blank && col > indents_.back()) {
      indents_.push_back(col);
      if (indents_.size() - 1 > kMaxIndentLevels)
        return Fail(
            j, "more than " + std::to_string(kMaxIndentLevels) + " levels of indentation (CPython refuses this too)");
    }
    while (!blank && col < indents_.back()) indents_.pop_back();
    i_ = j;
    return true;
  }

  /// One token at `i_`; sets `*line_begins` after a line end.
  bool Token(bool* line_begins) {
    switch (s_[i_]) {
      case '#':
        while (i_ < n_ && s_[i_] != '\n' && s_[i_] != '\r') ++i_;
        return true;
      case '\\':
        // A backslash at a line end joins the lines: the next one is no new logical line.
        if (i_ + 1 < n_ && (s_[i_ + 1] == '\n' || s_[i_ + 1] == '\r')) {
          i_ += s_[i_ + 1] == '\r' && i_ + 2 < n_ && s_[i_ + 2] == '\n' ? 3 : 2;
          NewLine(i_);
        } else {
          ++i_;
        }
        return true;
      case '\n':
      case '\r':
        i_ += s_[i_] == '\r' && i_ + 1 < n_ && s_[i_ + 1] == '\n' ? 2 : 1;
        NewLine(i_);
        *line_begins = true;
        if (depth_ == 0) ops_.LineEnd();
        return true;
      case '(':
      case '[':
      case '{': return OpenBracket();
      case ')':
      case ']':
      case '}':
        if (depth_ > 0) --depth_;
        ops_.Close();
        ++i_;
        return true;
      case '\'':
      case '"':
        i_ = SkipString(s_, i_, [this](size_t next) { NewLine(next); });
        ops_.Operand();
        return true;
      case ' ':
      case '\t':
      case '\f': ++i_; return true;
      default: return IsWordByte(s_[i_]) ? Word() : Operator();
    }
  }

  bool OpenBracket() {
    if (++depth_ > kMaxBracketDepth)
      return Fail(i_,
                  "brackets nested more than " + std::to_string(kMaxBracketDepth) + " deep (CPython refuses this too)");
    ops_.Open();
    ++i_;
    return true;
  }

  /// A name, a keyword or a number.
  bool Word() {
    const size_t at = i_;
    size_t e = i_;
    if (std::isdigit(static_cast<unsigned char>(s_[i_]))) {  // a number: 1e-5 is one operand
      while (e < n_ && (IsWordByte(s_[e]) || s_[e] == '.' ||
                        ((s_[e] == '-' || s_[e] == '+') && (s_[e - 1] == 'e' || s_[e - 1] == 'E'))))
        ++e;
      ops_.Operand();
      i_ = e;
      return true;
    }
    while (e < n_ && IsWordByte(s_[e])) ++e;
    std::string_view w = s_.substr(i_, e - i_);
    i_ = e;
    ApplyWord(ops_, w);
    return OperatorsWithinLimit(at);
  }

  /// Any other byte: an operator, a separator, `.5`, or something of no interest here.
  bool Operator() {
    const size_t at = i_;
    const char c = s_[i_];
    const char next = i_ + 1 < n_ ? s_[i_ + 1] : '\0';
    ++i_;
    switch (c) {
      case '-':
      case '+':
      case '~': PlusMinusTilde(c, next); break;
      case '*': Star(next); break;
      case '=':
        if (next == '=') {
          ops_.Binary();
          ++i_;
        } else {
          ops_.Separator(false);
        }
        break;
      case ',': ops_.Separator(false); break;
      case ';': ops_.Separator(true); break;
      case ':':
        if (next == '=') {  // :=
          ops_.Separator(true);
          ++i_;
        } else {
          ops_.Colon();
        }
        break;
      case '.':
        if (std::isdigit(static_cast<unsigned char>(next))) {  // .5
          while (i_ < n_ && (IsWordByte(s_[i_]) || s_[i_] == '.')) ++i_;
          ops_.Operand();
        }
        break;
      case '@':
        if (ops_.after_operand()) ops_.Binary();
        else ops_.Separator(true);  // a decorator
        break;
      case '<':
      case '>':
      case '!':
      case '/':
      case '%':
      case '&':
      case '|':
      case '^': BinaryOrAugmented(c, at); break;
      default: break;
    }
    return OperatorsWithinLimit(at);
  }

  /// `-`, `+`, `~` (`i_` is past it).
  void PlusMinusTilde(char c, char next) {
    if (next == '=' || (c == '-' && next == '>')) {  // -= += ->
      ops_.Separator(true);
      ++i_;
    } else if (c != '~' && ops_.after_operand()) {
      ops_.Binary();
    } else {
      ops_.Unary();
    }
  }

  /// `*`, `**`, `*=`, `**=` (`i_` is past the first `*`).
  void Star(char next) {
    if (next == '*') ++i_;
    if (i_ < n_ && s_[i_] == '=') {  // *= **=
      ops_.Separator(true);
      ++i_;
    } else if (next == '*' || !ops_.after_operand()) {
      ops_.Unary();  // a ** b nests to the right; *x and **x unpack
    } else {
      ops_.Binary();
    }
  }

  /// Binary operators; their augmented forms (<<= //= ...) are assignments.
  void BinaryOrAugmented(char c, size_t at) {
    while (i_ < n_ && (s_[i_] == '<' || s_[i_] == '>' || s_[i_] == '/' || s_[i_] == '=')) ++i_;
    if (s_[i_ - 1] == '=' && i_ - at >= 2 && !(i_ - at == 2 && (c == '<' || c == '>' || c == '!')))
      ops_.Separator(true);
    else ops_.Binary();
  }

  std::string_view s_;
  size_t n_;
  size_t i_ = 0;
  uint32_t depth_ = 0, line_ = 1;
  size_t line_start_ = 0;
  std::vector<uint32_t> indents_{0};
  OperatorNesting ops_;
  NestingProblem problem_;
};

}  // namespace

NestingProblem CheckNesting(std::string_view s) { return NestingScanner(s).Run(); }

ParsedSource PythonParser::Parse(std::string source, bool nesting_checked) {
  ParsedSource out;
  out.source = std::move(source);
  // Refused before tree-sitter sees it: its error recovery is what breaks on absurd nesting.
  if (NestingProblem nesting = nesting_checked ? NestingProblem{} : CheckNesting(out.source); nesting.line != 0) {
    out.error_line = nesting.line;
    out.error_col = nesting.col;
    out.refused = std::move(nesting.what);
    return out;
  }
  // A BOM stays in the text (a copy writes the file's own bytes) and is left out of the parse:
  // the tree's byte offsets are the file's, and its first row starts after the BOM.
  if (StartsWithBom(out.source)) {
    TSRange range{{0, static_cast<uint32_t>(kUtf8Bom.size())},
                  {UINT32_MAX, UINT32_MAX},
                  static_cast<uint32_t>(kUtf8Bom.size()),
                  UINT32_MAX};
    ts_parser_set_included_ranges(parser_, &range, 1);
  } else {
    ts_parser_set_included_ranges(parser_, nullptr, 0);
  }
  // A lone CR ends a line for CPython but not for tree-sitter's scanner: the tree is built from a
  // copy in which each becomes "\n" (one byte for one, so every offset is the file's) while the
  // text keeps the file's own bytes.
  std::string lf_copy;
  const std::string* parsed_text = &out.source;
  for (size_t cr = out.source.find('\r'); cr != std::string::npos; cr = out.source.find('\r', cr + 1)) {
    if (cr + 1 < out.source.size() && out.source[cr + 1] == '\n') continue;
    if (lf_copy.empty()) lf_copy = out.source;
    lf_copy[cr] = '\n';
    parsed_text = &lf_copy;
  }
  out.tree = ts_parser_parse_string(parser_, nullptr, parsed_text->data(), static_cast<uint32_t>(parsed_text->size()));
  if (!out.tree) {
    ts_parser_reset(parser_);
    return out;
  }
  TSNode root = ts_tree_root_node(out.tree);
  if (ts_node_has_error(root)) {
    TSNode err = root;
    if (FindFirstError(root, &err)) {
      TSPoint p = ts_node_start_point(err);
      out.error_line = p.row + 1;
      out.error_col = p.column + 1;
      if (ts_node_is_missing(err)) {
        out.error_what = std::string("missing '") + ts_node_type(err) + "'";
      } else {
        std::string_view text = NodeText(err, out.source);
        size_t nl = text.find('\n');
        if (nl != std::string_view::npos) text = text.substr(0, nl);
        if (text.size() > 40) text = text.substr(0, 40);
        out.error_what = "invalid syntax near '" + std::string(text) + "'";
      }
    }
  }
  return out;
}

std::vector<TSNode> NamedChildren(TSNode n) {
  std::vector<TSNode> out;
  TSTreeCursor cursor = ts_tree_cursor_new(n);
  if (ts_tree_cursor_goto_first_child(&cursor)) {
    do {
      TSNode c = ts_tree_cursor_current_node(&cursor);
      if (ts_node_is_named(c)) out.push_back(c);
    } while (ts_tree_cursor_goto_next_sibling(&cursor));
  }
  ts_tree_cursor_delete(&cursor);
  return out;
}

bool StringLiteralValue(const PySyntax& syn, TSNode n, std::string_view src, std::string* out) {
  if (syn.Kind(n) != NodeKind::kString) return false;
  std::string value;
  uint32_t count = ts_node_named_child_count(n);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode c = ts_node_named_child(n, i);
    std::string_view type = ts_node_type(c);
    if (type == "string_content") {
      value.append(NodeText(c, src));
    } else if (type == "interpolation") {
      return false;
    } else if (type == "escape_sequence") {
      value.append(NodeText(c, src));
    }
  }
  *out = std::move(value);
  return true;
}

}  // namespace portkit::analyse
