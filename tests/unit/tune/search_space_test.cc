#include "tune/search_space.h"

#include <gtest/gtest.h>

#include <set>

#include "tune/operators/gemm/gemm_space.h"

namespace portkit::tune {
namespace {

SearchSpace Small() {
  return SearchSpace({{"A", {1, 2, 3}, ""}, {"B", {1, 2}, ""}},
                     [](const SearchSpace& s, const Config& c) -> std::string {
                       return s.Get(c, "A") * s.Get(c, "B") > 4 ? "A*B > 4" : "";
                     });
}

TEST(SearchSpaceTest, EnumerateHonoursTheConstraintInOrder) {
  auto all = Small().Enumerate();
  std::vector<Config> want = {{1, 1}, {1, 2}, {2, 1}, {2, 2}, {3, 1}};
  EXPECT_EQ(all, want);
  EXPECT_EQ(Small().Check({3, 2}), "A*B > 4");
  EXPECT_EQ(Small().Check({5, 1}), "A=5 is not one of its values");
}

TEST(SearchSpaceTest, KeyParsesBack) {
  SearchSpace s = Small();
  EXPECT_EQ(s.Key({2, 1}), "A=2,B=1");
  auto c = s.Parse("B=2,A=1");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (Config{1, 2}));
  EXPECT_EQ(s.Parse("A=1").status().message(), "strategy 'A=1': knob B missing");
  EXPECT_EQ(s.Parse("A=1,C=2").status().message(), "strategy 'A=1,C=2': unknown knob C");
  EXPECT_EQ(s.Parse("A=x,B=1").status().message(), "strategy 'A=x,B=1': A is not an integer");
}

TEST(SearchSpaceTest, NeighboursAreValidAndOneStepAway) {
  SearchSpace s = Small();
  auto n = s.Neighbours({2, 1});
  std::set<Config> got(n.begin(), n.end());
  EXPECT_EQ(got, (std::set<Config>{{1, 1}, {3, 1}, {2, 2}}));
}

TEST(SearchSpaceTest, FixRestrictsAndNamesBadKnobs) {
  SearchSpace s = Small();
  EXPECT_TRUE(ApplyFix(s, "A=1,3").ok());
  EXPECT_EQ(s.Enumerate().size(), 3u);
  EXPECT_EQ(ApplyFix(s, "C=1").message(), "--fix C: unknown knob (knobs: A, B)");
  EXPECT_EQ(ApplyFix(s, "B=7").message(), "--fix B=7: not one of its values");
  EXPECT_EQ(ApplyFix(s, "B").message(), "--fix 'B': expected NAME=V1[,V2...]");
  EXPECT_EQ(ApplyFix(s, "B=1,x").message(), "--fix 'B=1,x': 'x' is not an integer");
}

TEST(SearchSpaceTest, AllowOnlyLimitsToRecordedConfigurations) {
  SearchSpace s = Small();
  s.AllowOnly({"A=1,B=2", "A=3,B=1"});
  EXPECT_EQ(s.Enumerate(), (std::vector<Config>{{1, 2}, {3, 1}}));
  Rng rng(1);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(s.Valid(s.Random(rng)));
}

TEST(SearchSpaceTest, RngIsDeterministic) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 5; ++i) {
    uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    EXPECT_NE(x, c.Next());
  }
}

TEST(SearchSpaceTest, DuplicateFixValuesCountOnce) {
  SearchSpace s = GemmSpace(4);
  ASSERT_TRUE(ApplyFix(s, "MR=4,6,4,6").ok());
  EXPECT_EQ(s.knobs()[static_cast<size_t>(s.Find("MR"))].values, (std::vector<int>{4, 6}));
}

TEST(GemmSpaceTest, DefaultStaysValidWhenFixExcludesItsValues) {
  // VW=8 with NR=48 needs 6 vectors per row: MR=6 (the default) overflows the registers.
  SearchSpace s = GemmSpace(4);
  ASSERT_TRUE(ApplyFix(s, "VW=8").ok());
  ASSERT_TRUE(ApplyFix(s, "NR=48").ok());
  Config d = GemmDefault(s, 4);
  EXPECT_EQ(s.Check(d), "");
  EXPECT_EQ(s.Get(d, "MR"), 4);  // the nearest valid configuration: one knob changed
  EXPECT_EQ(s.Get(d, "MC"), 96);
  // No valid configuration at all: the default is invalid, which the session rejects.
  ASSERT_TRUE(ApplyFix(s, "MR=12").ok());
  EXPECT_NE(s.Check(GemmDefault(s, 4)), "");
}

TEST(GemmSpaceTest, ConstraintsBetweenKnobs) {
  SearchSpace s = GemmSpace(2);
  Config d = GemmDefault(s, 2);
  EXPECT_EQ(s.Key(d), "MC=96,NC=1536,KC=256,MR=6,NR=16,VW=16,PACK_A=1,ORDER=0,UNROLL=1,THREADS=2");
  EXPECT_TRUE(s.Valid(d));
  auto bad = s.Parse("MC=96,NC=1536,KC=256,MR=12,NR=48,VW=8,PACK_A=1,ORDER=0,UNROLL=1,THREADS=2");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(s.Check(*bad), "register tile too large (MR*NR/VW + NR/VW + 1 > 32 registers)");
  auto all = s.Enumerate();
  EXPECT_GT(all.size(), 1000u);
  EXPECT_LT(all.size(), s.RawSize());
  for (const auto& c : all) {
    EXPECT_EQ(s.Get(c, "NR") % s.Get(c, "VW"), 0);
    EXPECT_EQ(s.Get(c, "MC") % s.Get(c, "MR"), 0);
  }
}

}  // namespace
}  // namespace portkit::tune
