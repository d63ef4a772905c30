// The statistics of `prof diff`'s noise-aware gate (src/prof/diff_stats.h): medians, quantiles,
// the seeded two-level bootstrap and the interval of a median change.
#include "prof/diff_stats.h"

#include <gtest/gtest.h>

#include <random>

namespace portkit::prof {
namespace {

/// `n` values around `center` with ±`jitter` (fraction) uniform noise and, one in `stall_every`,
/// a stall of +30 % (a preempted step), from a fixed seed.
std::vector<double> Noisy(size_t n, double center, double jitter, uint64_t seed, size_t stall_every = 0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-jitter, jitter);
  std::vector<double> out;
  for (size_t i = 0; i < n; ++i) {
    double v = center * (1 + u(gen));
    if (stall_every && i % stall_every == stall_every - 1) v *= 1.3;
    out.push_back(v);
  }
  return out;
}

TEST(DiffStats, MedianAndQuantile) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  std::vector<double> sorted{0, 10, 20, 30, 40};
  EXPECT_EQ(Quantile(sorted, 0), 0);
  EXPECT_EQ(Quantile(sorted, 1), 40);
  EXPECT_DOUBLE_EQ(Quantile(sorted, 0.5), 20);
  EXPECT_DOUBLE_EQ(Quantile(sorted, 0.125), 5);
}

TEST(DiffStats, ResamplesAreSeededAndStayInTheirRun) {
  auto a = DrawResamples({4, 0, 3}, 50, 7), b = DrawResamples({4, 0, 3}, 50, 7), c = DrawResamples({4, 0, 3}, 50, 8);
  ASSERT_EQ(a.draws.size(), 50u);
  EXPECT_EQ(a.draws, b.draws);
  EXPECT_NE(a.draws, c.draws);
  for (const auto& draw : a.draws) {
    // Two runs are drawn (the empty one is skipped), each as a block of its own steps' indices.
    size_t at = 0;
    for (int run = 0; run < 2; ++run) {
      ASSERT_LT(at, draw.size());
      bool first = draw[at] < 4;
      size_t len = first ? 4 : 3;
      for (size_t i = 0; i < len; ++i, ++at) EXPECT_TRUE(first ? draw[at] < 4 : draw[at] >= 4 && draw[at] < 7);
    }
    EXPECT_EQ(at, draw.size());
  }
  // One run: its steps resampled, every draw as long as the run.
  for (const auto& draw : DrawResamples({5}, 20, 1).draws) {
    EXPECT_EQ(draw.size(), 5u);
    for (uint32_t i : draw) EXPECT_LT(i, 5u);
  }
  EXPECT_TRUE(DrawResamples({}, 20, 1).draws.empty());
}

TEST(DiffStats, IdenticalNoisyStepsGiveAnIntervalAroundZero) {
  // 60 steps a side with ±15 % jitter and stalls: the point change is a few percent either way,
  // the interval holds 0 and its lower bound stays under a 5 % gate.
  auto base = Noisy(60, 100, 0.15, 1, 6), cmp = Noisy(60, 100, 0.15, 2, 6);
  auto rb = DrawResamples({60}, 2000, 11), rc = DrawResamples({60}, 2000, 12);
  auto c = MedianChangeInterval(base, rb, cmp, rc, 0.95);
  ASSERT_TRUE(c.has_value());
  EXPECT_LT(c->low, 0);
  EXPECT_GT(c->high, 0);
  EXPECT_LT(c->low, 5);
  EXPECT_LE(c->low, c->percent);
  EXPECT_GE(c->high, c->percent);
  // Deterministic: the same input gives the same bounds to the bit.
  auto again = MedianChangeInterval(base, rb, cmp, rc, 0.95);
  EXPECT_EQ(again->low, c->low);
  EXPECT_EQ(again->high, c->high);
}

TEST(DiffStats, ARealSlowdownHasItsLowerBoundAboveTheGate) {
  auto base = Noisy(60, 100, 0.05, 1, 6), cmp = Noisy(60, 112, 0.05, 2, 6);
  auto c = MedianChangeInterval(base, DrawResamples({60}, 2000, 11), cmp, DrawResamples({60}, 2000, 12), 0.95);
  ASSERT_TRUE(c.has_value());
  EXPECT_NEAR(c->percent, 12, 3);
  EXPECT_GT(c->low, 5);
  EXPECT_GT(c->high, c->low);
}

TEST(DiffStats, RunToRunNoiseWidensTheIntervalOfSeveralRuns) {
  // Three runs a side whose levels differ by a few percent (the machine between runs): the
  // two-level interval is wider than the one that pools all steps as one run.
  std::vector<double> base, cmp;
  for (uint64_t r = 0; r < 3; ++r) {
    auto b = Noisy(20, 100 * (1 + 0.04 * static_cast<double>(r)), 0.03, 10 + r);
    auto c = Noisy(20, 100 * (1 + 0.04 * static_cast<double>(2 - r)), 0.03, 20 + r);
    base.insert(base.end(), b.begin(), b.end());
    cmp.insert(cmp.end(), c.begin(), c.end());
  }
  auto runs =
      MedianChangeInterval(base, DrawResamples({20, 20, 20}, 2000, 1), cmp, DrawResamples({20, 20, 20}, 2000, 2), 0.95);
  auto pooled = MedianChangeInterval(base, DrawResamples({60}, 2000, 1), cmp, DrawResamples({60}, 2000, 2), 0.95);
  ASSERT_TRUE(runs && pooled);
  EXPECT_GT(runs->high - runs->low, pooled->high - pooled->low);
}

TEST(DiffStats, NoIntervalWithoutTwoStepsOrABase) {
  auto r = DrawResamples({1}, 100, 1);
  EXPECT_FALSE(MedianChangeInterval({1.0}, r, {2.0}, r, 0.95).has_value());
  auto r2 = DrawResamples({2}, 100, 1);
  EXPECT_FALSE(MedianChangeInterval({0.0, 0.0}, r2, {1.0, 2.0}, r2, 0.95).has_value());
  auto c = MedianChangeInterval({2.0, 2.0}, r2, {3.0, 3.0}, r2, 0.95);
  ASSERT_TRUE(c.has_value());
  EXPECT_DOUBLE_EQ(c->percent, 50);
  EXPECT_DOUBLE_EQ(c->low, 50);
  EXPECT_DOUBLE_EQ(c->high, 50);
}

}  // namespace
}  // namespace portkit::prof
