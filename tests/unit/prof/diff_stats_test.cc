// The statistics of `prof diff`'s noise-aware gate (src/prof/diff_stats.h): medians, quantiles,
// the seeded two-level bootstrap and the interval of a median change.
#include "prof/diff_stats.h"

#include <gtest/gtest.h>

#include <cmath>
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

TEST(DiffStats, WorkTimeSumsEachPositionsMinimumThenTakesTheMedianOverRuns) {
  // Two positions, five steps: a run of three steps, then one of two.
  const PositionTable t = {{4, 2, 3, 9, 5}, {1, 7, 6, 2, 8}};
  EXPECT_EQ(AllSteps({3, 0, 2}), (std::vector<std::vector<uint32_t>>{{0, 1, 2}, {3, 4}}));
  EXPECT_DOUBLE_EQ(WorkTime(t, {{0, 1, 2}}), 2 + 1);  // run 1: min 2 and min 1
  EXPECT_DOUBLE_EQ(WorkTime(t, {{3, 4}}), 5 + 2);     // run 2
  EXPECT_DOUBLE_EQ(WorkTime(t, AllSteps({3, 2})), (3 + 7) / 2.0);
  EXPECT_DOUBLE_EQ(WorkTime(t, {{0, 1, 2}, {3, 4}, {3, 3}}), 7);  // median of 3, 7, 9 + 2
  EXPECT_DOUBLE_EQ(WorkTime(t, {}), 0);
}

TEST(DiffStats, DrawnRunsAreRecordedWithTheirBlocks) {
  auto r = DrawResamples({4, 0, 3}, 30, 5);
  EXPECT_EQ(r.lengths, (std::vector<size_t>{4, 3}));
  ASSERT_EQ(r.runs.size(), 30u);
  for (size_t d = 0; d < r.draws.size(); ++d) {
    ASSERT_EQ(r.runs[d].size(), 2u);
    size_t at = 0;
    for (uint32_t run : r.runs[d]) {
      for (size_t i = 0; i < r.lengths[run]; ++i, ++at)
        EXPECT_TRUE(run == 0 ? r.draws[d][at] < 4 : r.draws[d][at] >= 4 && r.draws[d][at] < 7);
    }
    EXPECT_EQ(at, r.draws[d].size());
  }
}

/// The positions of `steps` steps of a step of `positions` positions of 1 ms (±2 % jitter), with
/// `stalls` preemptions a step (+0.5 to +4 ms each, at random positions), and `extra` more
/// positions of 1 ms (a real slowdown). A fixed seed.
PositionTable Preempted(size_t steps, size_t positions, size_t stalls, size_t extra, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> jitter(-0.02, 0.02), stall(0.5, 4.0);
  PositionTable t(positions + extra, std::vector<double>(steps));
  for (size_t s = 0; s < steps; ++s) {
    for (auto& row : t) row[s] = 1.0 + jitter(gen);
    for (size_t k = 0; k < stalls; ++k) t[gen() % t.size()][s] += stall(gen);
  }
  return t;
}

std::vector<double> StepSums(const PositionTable& t) {
  std::vector<double> out(t[0].size(), 0.0);
  for (const auto& row : t)
    for (size_t s = 0; s < row.size(); ++s) out[s] += row[s];
  return out;
}

TEST(DiffStats, WorkTimeIgnoresPreemptionThatMovesTheMedianStep) {
  // The same 50-position step, 60 steps a side; the compared run is preempted 12 times a step
  // (a busier machine), the base 2 times: its median step is ~+35 % slower, its work the same.
  auto base = Preempted(60, 50, 2, 0, 1), busy = Preempted(60, 50, 12, 0, 2);
  auto rb = DrawResamples({60}, 1000, 11), rc = DrawResamples({60}, 1000, 12);
  auto median = MedianChangeInterval(StepSums(base), rb, StepSums(busy), rc, 0.95);
  auto work = WorkChangeInterval(base, {60}, rb, busy, {60}, rc, 0.95);
  ASSERT_TRUE(median && work);
  EXPECT_GT(median->low, 20);
  EXPECT_LT(std::abs(work->percent), 2.5);
  EXPECT_LE(work->low, work->percent);
  EXPECT_GE(work->high, work->percent);
  EXPECT_EQ(SignificantVerdict(*work, 5), Verdict::kPass);
  // A real slowdown of 5 positions (+10 %) under the same preemption: found, and beyond a 5 % gate.
  auto slow = Preempted(60, 50, 12, 5, 3);
  auto slowed = WorkChangeInterval(base, {60}, rb, slow, {60}, rc, 0.95);
  ASSERT_TRUE(slowed);
  EXPECT_NEAR(slowed->percent, 10, 2.5);
  EXPECT_GT(slowed->low, 5);
  EXPECT_EQ(SignificantVerdict(*slowed, 5), Verdict::kRegressed);
  // Deterministic to the bit.
  auto again = WorkChangeInterval(base, {60}, rb, slow, {60}, rc, 0.95);
  EXPECT_EQ(again->low, slowed->low);
  EXPECT_EQ(again->high, slowed->high);
}

TEST(DiffStats, WorkChangeOfSeveralRunsResamplesRuns) {
  // Two runs a side, the second of the compared side 10 % slower in every position: the point
  // change is the median (mean) of the runs, +5 %, and the interval spans the run-to-run spread.
  PositionTable base = {{1, 1, 1, 1}}, cmp = {{1, 1, 1.1, 1.1}};
  auto rb = DrawResamples({2, 2}, 400, 1), rc = DrawResamples({2, 2}, 400, 2);
  auto c = WorkChangeInterval(base, {2, 2}, rb, cmp, {2, 2}, rc, 0.95);
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->percent, 5, 1e-9);
  EXPECT_NEAR(c->low, 0, 1e-9);
  EXPECT_NEAR(c->high, 10, 1e-9);
}

TEST(DiffStats, NoWorkChangeWithoutTwoStepsOrAWork) {
  auto r1 = DrawResamples({1}, 100, 1), r2 = DrawResamples({2}, 100, 1);
  EXPECT_FALSE(WorkChangeInterval({{1.0}}, {1}, r1, {{2.0}}, {1}, r1, 0.95));
  EXPECT_FALSE(WorkChangeInterval({{0.0, 0.0}}, {2}, r2, {{1.0, 2.0}}, {2}, r2, 0.95));
  EXPECT_FALSE(WorkChangeInterval({}, {2}, r2, {{1.0, 2.0}}, {2}, r2, 0.95));
  auto c = WorkChangeInterval({{2.0, 3.0}}, {2}, r2, {{3.0, 4.0}}, {2}, r2, 0.95);
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->percent, 50);
}

TEST(DiffStats, SignificantVerdictTable) {
  // regressed: above the limit and the interval all above 0
  EXPECT_EQ(SignificantVerdict({7, 0.5, 12}, 5), Verdict::kRegressed);
  EXPECT_EQ(SignificantVerdict({7, 6, 8}, 5), Verdict::kRegressed);
  // inconclusive: the interval holds both 0 and values above the limit
  EXPECT_EQ(SignificantVerdict({7, -1, 12}, 5), Verdict::kInconclusive);
  EXPECT_EQ(SignificantVerdict({2, -3, 9}, 5), Verdict::kInconclusive);
  EXPECT_EQ(SignificantVerdict({7, 0, 12}, 5), Verdict::kInconclusive);
  // pass: at most the limit, or significant but estimated within it
  EXPECT_EQ(SignificantVerdict({3, 1, 4.5}, 5), Verdict::kPass);
  EXPECT_EQ(SignificantVerdict({4, 2, 6}, 5), Verdict::kPass);
  EXPECT_EQ(SignificantVerdict({5, 2, 6}, 5), Verdict::kPass);
  EXPECT_EQ(SignificantVerdict({-20, -30, -10}, 5), Verdict::kPass);
  EXPECT_EQ(SignificantVerdict({0, -4, 5}, 5), Verdict::kPass);
}

}  // namespace
}  // namespace portkit::prof
