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

TuneOutcome Search(Fixture& f, const std::string& name, Budget budget, uint64_t seed,
                   std::vector<std::string>* log_out) {
  Logger logger(nullptr, [] { return std::chrono::system_clock::time_point{}; });  // stable log text
  auto strategy = MakeStrategy(name, {});
  EXPECT_TRUE(strategy.ok());
  (*strategy)->Initialise(f.space, f.start, seed);
  ReplayEvaluator evaluator(f.space, *f.points);
  auto out =
      TuneOperator(f.space, f.start, std::nullopt, **strategy, evaluator, budget, logger, "op", [] { return 0.0; });
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
  auto out =
      TuneOperator(f.space, f.start, std::nullopt, **strategy, evaluator, b, logger, "op", [&] { return now++; });
  EXPECT_EQ(out.stop_reason, "max-seconds reached");
  EXPECT_GE(out.evaluations, 1);
  EXPECT_LE(out.evaluations, 5);
}

TEST(StrategiesTest, DifferentSeedsExploreDifferently) {
  Fixture f;
  Budget b;
  b.max_evals = 3;
  for (const char* name : {"random", "annealing", "genetic", "bandit", "guided"}) {
    TuneOutcome a = Search(f, name, b, 1, nullptr), c = Search(f, name, b, 2, nullptr);
    EXPECT_NE(a.history, c.history) << name;
  }
}

TEST(StrategiesTest, UnknownStrategiesAndOptionsAreNamed) {
  EXPECT_EQ(MakeStrategy("hill", {}).status().message(),
            "--strategy hill: unknown strategy (strategies: exhaustive, random, annealing, genetic, bandit, guided)");
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

namespace portkit::tune {
namespace {

// Measures every configuration at a fixed cost, or rejects every one.
class FixedEvaluator : public Evaluator {
 public:
  explicit FixedEvaluator(double cost) : cost_(cost) {}
  std::vector<Evaluation> Evaluate(const std::vector<Config>& batch) override {
    std::vector<Evaluation> out;
    for (const auto& c : batch) {
      Evaluation e;
      e.config = c;
      e.status = std::isfinite(cost_) ? "ok" : "crashed";
      e.time_us = cost_;
      out.push_back(e);
    }
    return out;
  }
  bool Confirm(const Config&, const Config&, double*, double*) override { return false; }

 private:
  double cost_;
};

TEST(StrategiesTest, GeneticKeepsSearchingWhenEveryCandidateIsRejected) {
  SearchSpace space = GemmSpace(2);
  Config start = GemmDefault(space, 2);
  auto strategy = MakeStrategy("genetic", {});
  ASSERT_TRUE(strategy.ok());
  (*strategy)->Initialise(space, start, 1);
  FixedEvaluator evaluator(kRejected);
  Budget budget;
  budget.max_evals = 20;
  budget.patience = 0;
  budget.batch = 1;
  Logger logger(nullptr, SystemClock());
  auto out = TuneOperator(space, start, std::nullopt, **strategy, evaluator, budget, logger, "op", [] { return 0.0; });
  EXPECT_EQ(out.evaluations, 20);
  EXPECT_EQ(out.stop_reason, "max-evals reached");
}

// Proposes the same configuration twice, then nothing; records what it is told.
class Repeater : public Strategy {
 public:
  void Initialise(const SearchSpace& space, const Config& start, uint64_t) override {
    for (const auto& c : space.Enumerate())
      if (c != start) {
        other_ = c;
        break;
      }
  }
  std::optional<Config> Next() override {
    if (proposed_ >= 2) return std::nullopt;
    ++proposed_;
    return other_;
  }
  void Report(const Config& c, double cost) override {
    if (c == other_) reports.push_back(cost);
  }
  std::vector<double> reports;

 private:
  Config other_;
  int proposed_ = 0;
};

TEST(StrategiesTest, ADuplicateInOneBatchIsAnsweredWithItsResult) {
  SearchSpace space = GemmSpace(2);
  Config start = GemmDefault(space, 2);
  Repeater strategy;
  strategy.Initialise(space, start, 0);
  FixedEvaluator evaluator(5.0);
  Budget budget;
  budget.max_evals = 10;
  budget.batch = 4;
  Logger logger(nullptr, SystemClock());
  auto out = TuneOperator(space, start, std::nullopt, strategy, evaluator, budget, logger, "op", [] { return 0.0; });
  EXPECT_EQ(out.evaluations, 1);
  EXPECT_EQ(out.rejected, 0);
  EXPECT_EQ(strategy.reports, (std::vector<double>{5.0, 5.0}));  // not +inf for the duplicate
}

TEST(StrategiesTest, BanditCompletesASearchWithDuplicatesAcrossArms) {
  // Every arm proposes from the same small space, so arms often propose the same configuration
  // (each is then answered in turn); a sanity check that the search still covers the space.
  SearchSpace space = GemmSpace(2);
  for (const char* fix : {"MC=48", "NC=768", "KC=128", "VW=16", "PACK_A=1", "ORDER=0", "THREADS=1"})
    ASSERT_TRUE(ApplyFix(space, fix).ok());
  Config start = GemmDefault(space, 2);
  auto strategy = MakeStrategy("bandit", {});
  ASSERT_TRUE(strategy.ok());
  (*strategy)->Initialise(space, start, 3);
  FixedEvaluator evaluator(5.0);
  Budget budget;
  budget.max_evals = 1000;
  budget.patience = 0;
  budget.batch = 3;
  Logger logger(nullptr, SystemClock());
  auto out = TuneOperator(space, start, std::nullopt, **strategy, evaluator, budget, logger, "op", [] { return 0.0; });
  EXPECT_EQ(out.evaluations + 1, static_cast<int>(space.Enumerate().size()));  // all but the start
  EXPECT_EQ(out.rejected, 0);
}

}  // namespace
}  // namespace portkit::tune
