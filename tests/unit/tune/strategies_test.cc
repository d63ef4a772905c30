// Every strategy on a recorded landscape (replay): deterministic, within budget, and sane.
#include <gtest/gtest.h>

#include <cmath>

#include "core/log.h"
#include "replay_test_util.h"
#include "tune/operators/gemm/gemm_space.h"
#include "tune/strategies/strategy.h"
#include "tune/tuner.h"

namespace portkit::tune {
namespace {

struct Fixture {
  Landscape landscape = LoadFixtureLandscape();
  SearchSpace space;
  const std::map<std::string, LandscapePoint>* points = nullptr;
  Config start;
  double optimum = kRejected;

  Fixture() {
    const OpDesc& op = landscape.ops.at(0);
    points = &landscape.points.at(Signature(op));
    space = GemmSpace(2);
    for (const auto& f : landscape.fixes) EXPECT_TRUE(ApplyFix(space, f).ok()) << f;
    std::set<std::string> keys;
    for (const auto& [k, p] : *points) {
      keys.insert(k);
      if (p.status == "ok") optimum = std::min(optimum, p.time_us);
    }
    space.AllowOnly(keys);
    start = GemmDefault(space, 2);
  }
};

TuneOutcome Search(Fixture& f, const std::string& name, Budget budget, uint64_t seed, std::vector<std::string>* log_out) {
  Logger logger(nullptr, [] { return std::chrono::system_clock::time_point{}; });  // stable log text
  auto strategy = MakeStrategy(name, {});
  EXPECT_TRUE(strategy.ok());
  (*strategy)->Initialise(f.space, f.start, seed);
  ReplayEvaluator evaluator(f.space, *f.points);
  auto out = TuneOperator(f.space, f.start, std::nullopt, **strategy, evaluator, budget, logger, "op",
                          [] { return 0.0; });
  if (log_out) log_out->push_back(logger.Contents());
  return out;
}

TEST(StrategiesTest, FixtureIsAnExhaustiveLandscape) {
  Fixture f;
  ASSERT_EQ(f.landscape.ops.size(), 2u);
  EXPECT_EQ(f.space.Enumerate().size(), f.points->size());
  EXPECT_TRUE(f.points->count(f.space.Key(f.start)));
  EXPECT_TRUE(std::isfinite(f.optimum));
}

TEST(StrategiesTest, EveryStrategyIsDeterministicAndWithinBudget) {
  Fixture f;
  for (const auto& info : AllStrategies()) {
    for (int budget_evals : {1, 7, 30}) {
      Budget b;
      b.max_evals = budget_evals;
      b.batch = 2;
      std::vector<std::string> logs;
      TuneOutcome a = Search(f, info.name, b, 5, &logs);
      TuneOutcome again = Search(f, info.name, b, 5, &logs);
      EXPECT_LE(a.evaluations, budget_evals) << info.name;
      EXPECT_GE(a.evaluations, 1) << info.name;
      EXPECT_EQ(a.history, again.history) << info.name;
      EXPECT_EQ(a.history.size(), static_cast<size_t>(a.evaluations)) << info.name;
      EXPECT_EQ(a.best, again.best) << info.name;
      EXPECT_EQ(a.best_us, again.best_us) << info.name;
      EXPECT_EQ(logs[0], logs[1]) << info.name;
      // The best is a recorded configuration, never better than the landscape's optimum and
      // never worse than the default it started from.
      ASSERT_TRUE(f.points->count(f.space.Key(a.best))) << info.name;
      EXPECT_EQ(f.points->at(f.space.Key(a.best)).time_us, a.best_us) << info.name;
      EXPECT_GE(a.best_us, f.optimum) << info.name;
      EXPECT_LE(a.best_us, a.default_us) << info.name;
    }
  }
}

TEST(StrategiesTest, ExhaustiveWithAFullBudgetFindsTheOptimum) {
  Fixture f;
  Budget b;
  b.max_evals = 100000;
  TuneOutcome out = Search(f, "exhaustive", b, 0, nullptr);
  EXPECT_EQ(out.best_us, f.optimum);
  EXPECT_EQ(out.stop_reason, "search space exhausted");
  // Every configuration but the default (measured as the baseline) was evaluated once.
  EXPECT_EQ(out.evaluations, static_cast<int>(f.points->size()) - 1);
}

TEST(StrategiesTest, PatienceStopsASearchThatStopsImproving) {
  Fixture f;
  Budget b;
  b.max_evals = 1000;
  b.patience = 5;
  TuneOutcome out = Search(f, "random", b, 3, nullptr);
  EXPECT_EQ(out.stop_reason, "no improvement in 5 evaluations");
  EXPECT_LT(out.evaluations, 1000);
}

TEST(StrategiesTest, MaxSecondsStopsTheSearch) {
  Fixture f;
  Logger logger(nullptr, SystemClock());
  auto strategy = MakeStrategy("random", {});
  (*strategy)->Initialise(f.space, f.start, 1);
  ReplayEvaluator evaluator(f.space, *f.points);
  Budget b;
  b.max_evals = 1000;
  b.max_seconds = 5;
  double now = 0;  // a clock that advances one second per look
  auto out = TuneOperator(f.space, f.start, std::nullopt, **strategy, evaluator, b, logger, "op",
                          [&] { return now++; });
  EXPECT_EQ(out.stop_reason, "max-seconds reached");
  EXPECT_GE(out.evaluations, 1);
  EXPECT_LE(out.evaluations, 5);
}

TEST(StrategiesTest, DifferentSeedsExploreDifferently) {
  Fixture f;
  Budget b;
  b.max_evals = 3;
  for (const char* name : {"random", "annealing", "genetic", "bandit"}) {
    TuneOutcome a = Search(f, name, b, 1, nullptr), c = Search(f, name, b, 2, nullptr);
    EXPECT_NE(a.history, c.history) << name;
  }
}

TEST(StrategiesTest, UnknownStrategiesAndOptionsAreNamed) {
  EXPECT_EQ(MakeStrategy("hill", {}).status().message(),
            "--strategy hill: unknown strategy (strategies: exhaustive, random, annealing, genetic, bandit)");
  EXPECT_EQ(MakeStrategy("annealing", {"t1=3"}).status().message(),
            "--strategy-opt t1=3: strategy annealing has no option 't1' (options: t0, cooling, restart)");
  EXPECT_EQ(MakeStrategy("genetic", {"population=lots"}).status().message(),
            "--strategy-opt population=lots: 'lots' is not a number");
  EXPECT_TRUE(MakeStrategy("genetic", {"population=4", "mutation=0.3"}).ok());
  std::string help = StrategyHelp();
  for (const auto& info : AllStrategies()) {
    EXPECT_NE(help.find(info.name), std::string::npos);
    for (const auto& opt : info.options) EXPECT_NE(help.find(opt.name + "="), std::string::npos);
  }
}

}  // namespace
}  // namespace portkit::tune
