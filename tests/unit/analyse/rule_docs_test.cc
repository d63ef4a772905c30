// The rule docs table (from the doc comments of src/analyse/rules/*/*.cc): every registered rule
// has a complete doc; summaries and suppressions.
#include "analyse/rule_docs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "analyse/rules/affinity_apis/rules.h"
#include "analyse/rules/torch_apis/rules.h"

namespace portkit::analyse {
namespace {
namespace fs = std::filesystem;

void ExpectComplete(std::string_view name) {
  const RuleDoc* d = FindRuleDoc(name);
  ASSERT_NE(d, nullptr) << name << " has no doc comment";
  EXPECT_FALSE(d->what.empty()) << name;
  EXPECT_FALSE(d->why.empty()) << name;
  EXPECT_FALSE(d->example.empty()) << name;
  EXPECT_FALSE(d->use_instead.empty()) << name;
  std::string text = RuleDocText(*d);
  EXPECT_EQ(text.find("seed"), std::string::npos) << name;
  EXPECT_EQ(text.find("issue #"), std::string::npos) << name;
}

TEST(RuleDocs, EveryRegisteredRuleHasACompleteDoc) {
  for (const auto& r : MakeTorchApiRules()) ExpectComplete(r->name());
  for (const auto& r : MakeTorchApiProjectRules()) ExpectComplete(r->name());
  for (const auto& r : MakeAffinityRules()) ExpectComplete(r->name());
  ExpectComplete("affinity_function_template");
  ExpectComplete("affinity_class_template");
  // Sorted and unique.
  auto docs = RuleDocs();
  for (size_t i = 1; i < docs.size(); ++i) EXPECT_LT(docs[i - 1]->name, docs[i]->name);
}

TEST(RuleDocs, SummaryIsTheFirstSentence) {
  RuleDoc d{"x", "f", "", "", "calls of e.g. torch.cdist (a; b): more. And more.", "w", "e", "u"};
  EXPECT_EQ(RuleSummary(d), "calls of e.g. torch.cdist (a; b).");
  d.what = "no end";
  EXPECT_EQ(RuleSummary(d), "no end.");
}

TEST(RuleDocs, FilterBySelectAndIgnore) {
  std::vector<Finding> f(3);
  f[0].rule = "a";
  f[1].rule = "b";
  f[2].rule = "c";
  auto copy = f;
  EXPECT_EQ(FilterFindingsByRule(copy, {"a", "b"}, {"b"}), 2u);
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(copy[0].rule, "a");
  copy = f;
  EXPECT_EQ(FilterFindingsByRule(copy, {}, {}), 0u);
}

TEST(RuleDocs, InlineSuppressions) {
  fs::path root = fs::temp_directory_path() / ("portkit_rule_docs_" + std::to_string(::getpid()));
  fs::create_directories(root);
  std::ofstream(root / "m.py")
      << "a()  # portkit: ignore[r1, r2]\nb()  #portkit:ignore\nc()\nd()  # portkit: ignore[r3]\n";
  std::vector<Finding> f;
  for (uint32_t line : {1u, 2u, 3u, 4u}) {
    Finding x;
    x.file = "proj/m.py";
    x.start_line = line;
    x.rule = "r2";
    f.push_back(x);
  }
  Finding missing;
  missing.file = "proj/missing.py";
  missing.start_line = 1;
  missing.rule = "r2";
  f.push_back(missing);
  EXPECT_EQ(ApplyInlineSuppressions(f, "proj", root.string()), 2u);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].start_line, 3u);
  EXPECT_EQ(f[1].start_line, 4u);  // r3 only
  EXPECT_EQ(f[2].file, "proj/missing.py");
  fs::remove_all(root);
}

}  // namespace
}  // namespace portkit::analyse
