// The Python front end on hostile input: nesting past CPython's own limits is refused before
// tree-sitter sees it, and a BOM stays in the text (left out of the parse), so copies keep it.
#include <gtest/gtest.h>

#include <string>

#include "analyse/dynamic_shape.h"
#include "analyse/python_syntax.h"

namespace portkit::analyse {
namespace {

std::string Repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

TEST(CheckNesting, TwoHundredBracketsAreValidPythonAndAccepted) {
  EXPECT_EQ(CheckNesting("x = " + Repeat("(", 200) + "1" + Repeat(")", 200) + "\n").line, 0u);
  EXPECT_EQ(CheckNesting("x = " + Repeat("([{", 66) + "(1" + Repeat("}])", 66) + ")\n").line, 0u);
}

TEST(CheckNesting, TheTwoHundredAndFirstBracketIsRefusedWithItsPosition) {
  NestingProblem p = CheckNesting("import torch\nx = " + Repeat("[", 201) + "\n");
  EXPECT_EQ(p.line, 2u);
  EXPECT_EQ(p.col, 205u);
  EXPECT_EQ(p.what, "brackets nested more than 200 deep (CPython refuses this too)");
  p = CheckNesting(Repeat("(", 80000));
  EXPECT_EQ(p.line, 1u);
  EXPECT_EQ(p.col, 201u);
}

TEST(CheckNesting, BracketsInStringsAndCommentsDoNotCount) {
  std::string deep = Repeat("(", 500);
  EXPECT_EQ(CheckNesting("s = '" + deep + "'\n# " + deep + "\nt = \"\"\"\n" + deep + "\n\"\"\"\n").line, 0u);
  EXPECT_EQ(CheckNesting("s = r'\\'" + deep + "'\nu = '\\\n" + deep + "'\n").line, 0u);
  // An unterminated one-line string ends at its line end: what follows is code again.
  EXPECT_EQ(CheckNesting("s = '" + deep + "\nx = " + Repeat("(", 201)).line, 2u);
}

TEST(CheckNesting, LinesAreCountedAcrossStringsAndLineEnds) {
  NestingProblem p = CheckNesting("a = '''\n\n'''\r\nb = 1\rc = " + Repeat("{", 201));
  EXPECT_EQ(p.line, 5u);
  EXPECT_EQ(p.col, 205u);
}

TEST(CheckNesting, MoreThanAHundredIndentationLevelsAreRefused) {
  std::string ok, deep;
  for (int i = 0; i < 100; ++i) ok += std::string(i, ' ') + "if x:\n";
  ok += std::string(100, ' ') + "pass\n";
  EXPECT_EQ(CheckNesting(ok).line, 0u);
  for (int i = 0; i < 120; ++i) deep += std::string(i, ' ') + "if x:\n";
  NestingProblem p = CheckNesting(deep);
  EXPECT_EQ(p.line, 102u);
  EXPECT_EQ(p.col, 102u);
  EXPECT_EQ(p.what, "more than 100 levels of indentation (CPython refuses this too)");
}

TEST(CheckNesting, IndentationInsideBracketsContinuationsAndBlankLinesIsNoLevel) {
  std::string inside = "x = (\n";
  for (int i = 0; i < 150; ++i) inside += std::string(i, ' ') + "1,\n";
  inside += ")\n";
  EXPECT_EQ(CheckNesting(inside).line, 0u);
  std::string continued = "x = 1";
  for (int i = 0; i < 150; ++i) continued += " \\\n" + std::string(i, ' ') + "+ 1";
  EXPECT_EQ(CheckNesting(continued + "\n").line, 0u);
  std::string blanks;
  for (int i = 0; i < 150; ++i) blanks += std::string(i, ' ') + "# comment\n" + std::string(i, '\t') + "\n";
  EXPECT_EQ(CheckNesting(blanks).line, 0u);
}

// Operators nested without brackets reach the same depth in tree-sitter's tree and the walkers as
// brackets do: refused past kMaxOperatorNesting, at the token that goes past it.
TEST(CheckNesting, OperatorChainsWithoutBracketsAreRefusedPastTwoHundred) {
  const std::string what =
      "operators nested more than 200 deep without brackets (unary -, +, ~, not, await, lambda, ** or conditional "
      "expressions; no real code comes near)";
  struct Form {
    std::string name, unit, tail;
    uint32_t col_of_201st;  // column of the 201st operator on line 2 ("x = " first)
  };
  std::string cond;
  for (int i = 0; i < 201; ++i) cond += "a" + std::to_string(i % 10) + " if c else ";
  const std::vector<Form> forms = {
      {"unary minus", "- ", "x", 5 + 2 * 200},
      {"unary plus", "+ ", "x", 5 + 2 * 200},
      {"not", "not ", "x", 5 + 4 * 200},
      {"tilde", "~", "x", 5 + 200},
      {"await", "await ", "x", 5 + 6 * 200},
      {"lambda", "lambda: ", "x", 5 + 8 * 200},
      {"lambda with parameters", "lambda a, b=1: ", "x", 5 + 15 * 200},
      {"power", "a ** ", "b", 5 + 5 * 200 + 2},
      {"star", "* ", "x", 5 + 2 * 200},
  };
  for (const Form& f : forms) {
    std::string body;
    for (int i = 0; i < 200; ++i) body += f.unit;
    EXPECT_EQ(CheckNesting("import torch\nx = " + body + f.tail + "\n").line, 0u) << f.name << ": 200 are accepted";
    NestingProblem p = CheckNesting("import torch\nx = " + body + f.unit + f.tail + "\n");
    EXPECT_EQ(p.line, 2u) << f.name;
    EXPECT_EQ(p.col, f.col_of_201st) << f.name;
    EXPECT_EQ(p.what, what) << f.name;
  }
  NestingProblem p = CheckNesting("x = " + cond + "z\n");
  EXPECT_EQ(p.line, 1u);
  EXPECT_EQ(p.what, what);
  // Mixed forms count together; a bracket level starts from the depth around it.
  EXPECT_EQ(CheckNesting("x = " + Repeat("- not ~", 67) + "x\n").line, 1u);
  EXPECT_EQ(CheckNesting("x = " + Repeat("- -f(", 101) + "1" + Repeat(")", 101) + "\n").line, 1u);
  EXPECT_EQ(CheckNesting("x = " + Repeat("- -f(", 100) + "1" + Repeat(")", 100) + "\n").line, 0u);
}

TEST(CheckNesting, OperatorsThatEndTheirOperandDoNotNest) {
  // Thousands of operators in one logical line, as generated code and data tables hold them.
  std::string terms = "x = 0", table = "t = [", poly = "p = 0", compare = "ok = 0", cond = "v = (";
  for (int i = 0; i < 3000; ++i) {
    terms += " + -a" + std::to_string(i) + " * ~b - +c ** -2 / not_d";
    table += "-" + std::to_string(i) + ", not x, *y, lambda q=-1, r=-2: -q, ";
    poly += " - x**2*y**3 + -z**-1";
    compare += " or not a < -b and not c in d and e is not -f";
    cond += "a if b else c, ";
  }
  for (const std::string& src : {terms + "\n", table + "]\n", poly + "\n", compare + "\n", cond + ")\n"})
    EXPECT_EQ(CheckNesting(src).line, 0u) << src.substr(0, 60);
  // Line ends, `;`, `=` and augmented assignments end every open operator.
  std::string lines;
  for (int i = 0; i < 1000; ++i) lines += "x = -y; z -= -1; w **= -2\nif not a: b = -c if d else -e\nelse: pass\n";
  EXPECT_EQ(CheckNesting(lines).line, 0u);
  // Strings, comments and numbers with exponents are no operators.
  EXPECT_EQ(CheckNesting("s = '" + Repeat("- ", 500) + "'\n# " + Repeat("not ", 500) +
                         "\nn = " + Repeat("1e-5 + ", 500) + "1\n")
                .line,
            0u);
}

TEST(PythonParser, RefusesAbsurdNestingWithoutATree) {
  PythonParser parser;
  ParsedSource parsed = parser.Parse(Repeat("(", 80000) + Repeat("\n", 20000));
  EXPECT_EQ(parsed.tree, nullptr);
  EXPECT_EQ(parsed.error_line, 1u);
  EXPECT_EQ(parsed.error_col, 201u);
  EXPECT_EQ(parsed.refused, "brackets nested more than 200 deep (CPython refuses this too)");
  // The parser is fine afterwards.
  ParsedSource next = parser.Parse("x = (1)\n");
  ASSERT_NE(next.tree, nullptr);
  EXPECT_FALSE(next.has_error());
}

TEST(PythonParser, KeepsABomInTheTextAndLeavesItOutOfTheParse) {
  PythonParser parser;
  const std::string source = std::string(kUtf8Bom) + "import torch\nx = torch.randn(3).cuda()\n";
  ParsedSource parsed = parser.Parse(source);
  ASSERT_NE(parsed.tree, nullptr);
  EXPECT_FALSE(parsed.has_error()) << parsed.error_what;
  EXPECT_EQ(parsed.source, source);
  TSNode first = ts_node_named_child(parsed.root(), 0);
  EXPECT_EQ(ts_node_start_byte(first), 3u);
  EXPECT_EQ(NodeText(first, parsed.source), "import torch");
  // The next file, without a BOM, is parsed whole again.
  ParsedSource plain = parser.Parse("import os\n");
  EXPECT_EQ(ts_node_start_byte(ts_node_named_child(plain.root(), 0)), 0u);
}

TEST(InstrumentSource, KeepsTheBomFirst) {
  PySyntax syn;
  PythonParser parser;
  for (const std::string body : {"# header\nfor b in train_loader:\n    pass\n", "\nfor b in train_loader:\n    pass\n",
                                 "import torch\nfor b in train_loader:\n    pass\n"}) {
    const std::string source = std::string(kUtf8Bom) + body;
    ParsedSource parsed = parser.Parse(source);
    auto summary = std::make_unique<ModuleSummary>(SummariseModule(syn, parsed, "m", false));
    ModuleSummary* s = summary.get();
    ProjectIndex index;
    index.Add(std::move(summary));
    index.Freeze();
    std::vector<WrappedLoop> loops = FindDataLoops(syn, parsed, *s, index);
    ASSERT_EQ(loops.size(), 1u) << body;
    std::string warning;
    std::string text = InstrumentSource(syn, parsed, loops, 0, &warning);
    EXPECT_EQ(text.substr(0, 3), kUtf8Bom) << text;
    EXPECT_EQ(text.substr(3, 10), "import sys") << text;
    EXPECT_EQ(warning, "");
    EXPECT_NE(text.find("DETECTOR.start(train_loader)"), std::string::npos);
  }
}

}  // namespace
}  // namespace portkit::analyse
