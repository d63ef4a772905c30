// The instrumented copy of dynamic_shape: loops found through the walker's values, every line kept.
#include <gtest/gtest.h>

#include <algorithm>

#include "analyse/dynamic_shape.h"

namespace portkit::analyse {
namespace {

struct Instrumented {
  std::vector<WrappedLoop> loops;
  std::string text;
  std::string warning;
};

Instrumented Instrument(const std::string& source, int depth = 0) {
  PySyntax syn;
  PythonParser parser;
  ParsedSource parsed = parser.Parse(source);
  auto summary = std::make_unique<ModuleSummary>(SummariseModule(syn, parsed, "m", false));
  ModuleSummary* s = summary.get();
  ProjectIndex index;
  index.Add(std::move(summary));
  index.Freeze();
  Instrumented out;
  out.loops = FindDataLoops(syn, parsed, *s, index);
  out.text = InstrumentSource(syn, parsed, out.loops, depth, &out.warning);
  EXPECT_EQ(std::count(out.text.begin(), out.text.end(), '\n'), std::count(source.begin(), source.end(), '\n'))
      << "a line was added or removed:\n"
      << out.text;
  return out;
}

std::string Line(const std::string& text, int n) {  // 1-based
  size_t b = 0;
  for (int i = 1; i < n; ++i) b = text.find('\n', b) + 1;
  return text.substr(b, text.find('\n', b) - b);
}

TEST(DynamicShape, RecognisesDataLoaderLoopsByValueAndByName) {
  auto r = Instrument(
      "import torch\n"                               // 1
      "from torch.utils.data import DataLoader\n"    // 2
      "from tqdm import tqdm\n"                      // 3
      "def train(ds, prefetcher):\n"                 // 4
      "    dl = DataLoader(ds, batch_size=2)\n"      // 5
      "    for x in dl:\n"                           // 6
      "        pass\n"                               // 7
      "    for i, (a, b) in tqdm(enumerate(dl)):\n"  // 8
      "        pass\n"                               // 9
      "    for batch in prefetcher:\n"               // 10
      "        pass\n"                               // 11
      "    for epoch in range(3):\n"                 // 12
      "        pass\n"                               // 13
      "    for x in self.val_loader:\n"              // 14
      "        pass\n");                             // 15
  ASSERT_EQ(r.loops.size(), 4u);
  EXPECT_EQ(Line(r.text, 6), "    for x in DETECTOR.start(dl):");
  EXPECT_EQ(Line(r.text, 8), "    for i, (a, b) in DETECTOR.start(tqdm(enumerate(dl))):");
  EXPECT_EQ(Line(r.text, 10), "    for batch in DETECTOR.start(prefetcher):");
  EXPECT_EQ(Line(r.text, 12), "    for epoch in range(3):");
  EXPECT_EQ(Line(r.text, 14), "    for x in DETECTOR.start(self.val_loader):");
  EXPECT_EQ(Line(r.text, 1).rfind("import sys as _msft_sys", 0), 0u);
  EXPECT_NE(Line(r.text, 1).find("from msft_dynamic_analysis import DETECTOR; import torch"), std::string::npos);
}

TEST(DynamicShape, FollowsNamesBoundToLoadersAndLoaderWrappers) {
  auto r = Instrument(
      "from tqdm import tqdm\n"                             // 1
      "def train(train_loader, data, n):\n"                 // 2
      "    pbar = enumerate(train_loader)\n"                // 3
      "    for i, batch in pbar:\n"                         // 4
      "        pass\n"                                      // 5
      "    bar = tqdm(enumerate(train_loader), total=n)\n"  // 6
      "    for i, batch in bar:\n"                          // 7
      "        pass\n"                                      // 8
      "    it = iter(train_loader)\n"                       // 9
      "    for batch in it:\n"                              // 10
      "        pass\n"                                      // 11
      "    rows = enumerate(data)\n"                        // 12
      "    for i, row in rows:\n"                           // 13
      "        pass\n"                                      // 14
      "    steps = tqdm(range(n))\n"                        // 15
      "    for s in steps:\n"                               // 16
      "        pass\n");                                    // 17
  ASSERT_EQ(r.loops.size(), 3u);
  EXPECT_EQ(Line(r.text, 4), "    for i, batch in DETECTOR.start(pbar):");
  EXPECT_EQ(Line(r.text, 7), "    for i, batch in DETECTOR.start(bar):");
  EXPECT_EQ(Line(r.text, 10), "    for batch in DETECTOR.start(it):");
  EXPECT_EQ(Line(r.text, 13), "    for i, row in rows:");  // not a loader
  EXPECT_EQ(Line(r.text, 16), "    for s in steps:");      // tqdm of a range
}

TEST(DynamicShape, FollowsReBindingsThroughWrappersOfAnyName) {
  auto r = Instrument(
      "def train(train_loader, nb, other):\n"            // 1
      "    pbar = enumerate(train_loader)\n"             // 2
      "    pbar = ProgressBar(pbar, total=nb)\n"         // 3
      "    for i, (imgs, targets, paths, _) in pbar:\n"  // 4
      "        pass\n"                                   // 5
      "    for a, b in zip(other, train_loader):\n"      // 6
      "        pass\n"                                   // 7
      "    for i in range(len(train_loader)):\n"         // 8
      "        pass\n"                                   // 9
      "    n = len(train_loader)\n"                      // 10
      "    for i in Bar(n):\n"                           // 11
      "        pass\n");                                 // 12
  ASSERT_EQ(r.loops.size(), 2u);
  EXPECT_EQ(Line(r.text, 4), "    for i, (imgs, targets, paths, _) in DETECTOR.start(pbar):");
  EXPECT_EQ(Line(r.text, 6), "    for a, b in DETECTOR.start(zip(other, train_loader)):");
  EXPECT_EQ(Line(r.text, 8), "    for i in range(len(train_loader)):");  // a count, not the data
  EXPECT_EQ(Line(r.text, 11), "    for i in Bar(n):");
}

TEST(DynamicShape, WrapsTheLoaderOfAnIteratorKeptForNext) {
  auto r = Instrument(
      "class Trainer:\n"                             // 1
      "    def __init__(self, data_loader):\n"       // 2
      "        self.data_loader = data_loader\n"     // 3
      "        self._it = iter(self.data_loader)\n"  // 4
      "    def run_step(self):\n"                    // 5
      "        return next(self._it)\n"              // 6
      "def loop(train_loader, val_loader):\n"        // 7
      "    it = iter(train_loader)\n"                // 8
      "    while True:\n"                            // 9
      "        batch = next(it)\n"                   // 10
      "    sample = next(iter(val_loader))\n");      // 11
  ASSERT_EQ(r.loops.size(), 2u);
  EXPECT_TRUE(r.loops[0].at_iterator);
  EXPECT_EQ(Line(r.text, 4), "        self._it = iter(DETECTOR.start(self.data_loader))");
  EXPECT_EQ(Line(r.text, 8), "    it = iter(DETECTOR.start(train_loader))");
  EXPECT_EQ(Line(r.text, 11), "    sample = next(iter(val_loader))");  // one batch, no loop
}

TEST(DynamicShape, LoopsInDataPipelineClassesAreRejectedWithTheReason) {
  PySyntax syn;
  PythonParser parser;
  ParsedSource parsed = parser.Parse(
      "from torch.utils.data import DataLoader, Dataset, Sampler\n"  // 1
      "class Stats(Dataset):\n"                                      // 2
      "    def mean(self):\n"                                        // 3
      "        for x in DataLoader(self):\n"                         // 4
      "            pass\n"                                           // 5
      "class GroupSampler(Sampler):\n"                               // 6
      "    def __iter__(self):\n"                                    // 7
      "        for idx in iter(self.loader):\n"                      // 8
      "            yield idx\n"                                      // 9
      "def show(batches):\n"                                         // 10
      "    for b in batches:\n"                                      // 11
      "        pass\n");                                             // 12
  auto summary = std::make_unique<ModuleSummary>(SummariseModule(syn, parsed, "m", false));
  ModuleSummary* s = summary.get();
  ProjectIndex index;
  index.Add(std::move(summary));
  index.Freeze();
  std::vector<RejectedLoop> rejected;
  auto loops = FindDataLoops(syn, parsed, *s, index, &rejected);
  EXPECT_TRUE(loops.empty());
  ASSERT_EQ(rejected.size(), 3u);
  EXPECT_EQ(rejected[0].line, 4u);
  EXPECT_EQ(rejected[0].reason,
            "inside the data-pipeline class Stats (it fetches samples; it is not the training loop)");
  EXPECT_EQ(rejected[1].line, 8u);
  EXPECT_EQ(rejected[1].reason,
            "inside the data-pipeline class GroupSampler (it fetches samples; it is not the training loop)");
  EXPECT_EQ(rejected[2].line, 11u);
  EXPECT_EQ(rejected[2].reason, "`batches` is not bound in its function to a loader or a wrapper of one");
}

TEST(DynamicShape, ATestClassNamedAfterALoaderIsNoDataPipelineClass) {
  auto r = Instrument(
      "import unittest\n"                               // 1
      "class TestCombinedLoader(unittest.TestCase):\n"  // 2
      "    def test_all(self):\n"                       // 3
      "        for b in self.train_loader:\n"           // 4
      "            pass\n");                            // 5
  ASSERT_EQ(r.loops.size(), 1u);
  EXPECT_EQ(Line(r.text, 4), "        for b in DETECTOR.start(self.train_loader):");
}

TEST(DynamicShape, ImportGoesAfterFutureImportsAndNotBeforeAShebang) {
  auto r = Instrument(
      "#!/usr/bin/env python\n"               // 1
      "from __future__ import annotations\n"  // 2
      "\n"                                    // 3
      "def f(loader):\n"                      // 4
      "    for b in loader:\n"                // 5
      "        pass\n");                      // 6
  EXPECT_EQ(Line(r.text, 1), "#!/usr/bin/env python");
  EXPECT_EQ(Line(r.text, 2), "from __future__ import annotations");
  EXPECT_EQ(Line(r.text, 3).rfind("import sys as _msft_sys", 0), 0u);
  EXPECT_TRUE(r.warning.empty());
}

TEST(DynamicShape, ImportOnACommentLineAndDepthOfTheFile) {
  auto r =
      Instrument("  # a comment\nclass A:\n    def f(self):\n        for b in self.loader:\n            pass\n", 2);
  EXPECT_NE(Line(r.text, 1).find("\"../..\""), std::string::npos);
  EXPECT_NE(Line(r.text, 1).find("import DETECTOR  # a comment"), std::string::npos);
}

TEST(DynamicShape, AlreadyWrappedLoopsAreLeftAlone) {
  auto r = Instrument("from msft_dynamic_analysis import DETECTOR\nfor b in DETECTOR.start(loader):\n    pass\n");
  EXPECT_TRUE(r.loops.empty());
}

TEST(DynamicShape, ModuleLevelLoopBeforeAnyFreeLineIsWarned) {
  auto r = Instrument("for b in loader:\n    pass\n");
  ASSERT_EQ(r.loops.size(), 1u);
  EXPECT_FALSE(r.warning.empty());
}

}  // namespace
}  // namespace portkit::analyse
