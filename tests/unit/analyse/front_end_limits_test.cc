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
