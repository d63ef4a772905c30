#pragma once
/// The tuning loop of one operator: the strategy proposes, the evaluator builds (in parallel)
/// and measures (one at a time), a new best is re-measured interleaved with the incumbent before
/// it is accepted, and budgets stop the search.
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/log.h"
#include "tune/builder.h"
#include "tune/landscape.h"
#include "tune/operators/operator.h"
#include "tune/runner.h"
#include "tune/strategies/strategy.h"

namespace portkit::tune {

constexpr double kRejected = std::numeric_limits<double>::infinity();

struct Evaluation {
  Config config;
  std::string status;  ///< "ok", "compile_error", or a MeasureStatusName
  double time_us = kRejected;
  std::string detail;
};

/// The significance rule (docs/tune.md, "When is a candidate better"): a candidate replaces an
/// incumbent (the default strategy, a bank entry) only when it is faster by more than the noise.
/// With n >= 5 interleaved pairs (candidate and incumbent timed alternately in one process), the
/// paired speed-ups r_i = incumbent_i / candidate_i are sorted and the k-th smallest is the lower
/// bound of a distribution-free one-sided 90 % confidence interval of their median (sign test: k
/// the largest with P(Binomial(n, 1/2) <= k - 1) <= 0.10; n = 7 gives k = 2). Significant when
/// that lower bound exceeds 1 and the median speed-up is at least 1 + min_gain. With fewer pairs
/// (a replayed landscape holds one median per configuration) only the margin applies: speed-up
/// >= 1 + min_gain. Deterministic for given samples.
constexpr double kMinGain = 0.01;
struct Comparison {
  double candidate_us = 0, incumbent_us = 0;  ///< medians of the interleaved samples
  double speedup = 0;                         ///< median of incumbent_i / candidate_i (or the ratio of single values)
  double lower_bound = 0;                     ///< of the speed-up (= speedup with fewer than 5 pairs)
  int pairs = 0;
  bool significant = false;
};
Comparison CompareSamples(const std::vector<double>& candidate, const std::vector<double>& incumbent,
                          double min_gain = kMinGain);

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  /// Evaluates a batch; results in batch order.
  virtual std::vector<Evaluation> Evaluate(const std::vector<Config>& batch) = 0;
  /// Re-measures `candidate` and `incumbent` interleaved; false when either is rejected.
  virtual bool Confirm(const Config& candidate, const Config& incumbent, double* candidate_us,
                       double* incumbent_us) = 0;
  /// Re-measures both interleaved and applies the significance rule; nullopt when either is
  /// rejected.
  virtual std::optional<Comparison> Compare(const Config& candidate, const Config& incumbent) {
    double c = 0, i = 0;
    if (!Confirm(candidate, incumbent, &c, &i)) return std::nullopt;
    return CompareSamples({c}, {i});
  }
  /// Not empty once the evaluator met an infrastructure failure (a compiler that no longer
  /// compiles the known-good default, an output that cannot be written): the run must stop, and
  /// what failed is not a property of the configuration (it is not recorded).
  virtual std::string failure() const { return ""; }
};

/// Compiles and measures real candidates; records every measurement in `landscape`.
/// Timeout of a measuring child for an operator of `flops` per call: scaled so that a slow but
/// correct candidate of a large operator is not killed (at least MeasureOptions' default).
int CandidateTimeoutSeconds(double flops, int repeats, int candidates);

class CompileEvaluator : public Evaluator {
 public:
  CompileEvaluator(const TunableOperator& op, const SearchSpace& space, Builder& builder, MeasureOptions measure,
                   Landscape* landscape, Logger& logger);
  std::vector<Evaluation> Evaluate(const std::vector<Config>& batch) override;
  bool Confirm(const Config& candidate, const Config& incumbent, double* candidate_us, double* incumbent_us) override;
  std::optional<Comparison> Compare(const Config& candidate, const Config& incumbent) override;
  std::string failure() const override { return failure_; }

 private:
  const Workload& workload();
  std::string failure_;
  const TunableOperator& op_;
  const SearchSpace& space_;
  Builder& builder_;
  MeasureOptions measure_;
  Landscape* landscape_;
  Logger& logger_;
  std::string signature_;
  std::optional<Workload> workload_;
  std::map<std::string, std::filesystem::path> objects_;
};

/// Answers from a recorded landscape (no compiling, no measuring).
class ReplayEvaluator : public Evaluator {
 public:
  ReplayEvaluator(const SearchSpace& space, const std::map<std::string, LandscapePoint>& points);
  std::vector<Evaluation> Evaluate(const std::vector<Config>& batch) override;
  bool Confirm(const Config& candidate, const Config& incumbent, double* candidate_us, double* incumbent_us) override;
  std::optional<Comparison> Compare(const Config& candidate, const Config& incumbent) override;

 private:
  Evaluation Lookup(const Config& c) const;
  const SearchSpace& space_;
  const std::map<std::string, LandscapePoint>& points_;
};

/// `portkit tune`'s defaults (docs/tune.md, "Strategies" and "Budgets"): the strategy and the
/// budget per operator. With them the search reaches 5 % of the optimum in >= 90 % of seeds on the
/// recorded landscapes (tests/unit/tune/search_quality_test.cc).
inline constexpr const char* kDefaultStrategy = "guided";
constexpr int kDefaultMaxEvals = 80;
constexpr int kDefaultPatience = 0;

struct Budget {
  int max_evals = 40;      ///< candidates evaluated per operator (the baselines not counted)
  double max_seconds = 0;  ///< wall time per operator; 0 = no limit
  int patience = 0;        ///< stop after this many evaluations without a new best; 0 = never
  int batch = 1;           ///< proposals built at once (the parallel compile count)
};

struct TuneOutcome {
  Config default_config;
  double default_us = kRejected;
  std::string default_status;
  std::optional<Config> stored;  ///< the bank's entry being re-tuned
  double stored_us = kRejected;
  Config best;
  double best_us = kRejected;
  int evaluations = 0;
  int rejected = 0;
  std::string stop_reason;
  std::vector<Config> history;  ///< evaluated candidates in order (the baselines not included)
};

/// Tunes one operator from `start` (the default strategy). With `stored`, that configuration is
/// measured too and is the incumbent to beat. `label` prefixes log lines; `clock` gives seconds.
TuneOutcome TuneOperator(const SearchSpace& space, const Config& start, const std::optional<Config>& stored,
                         Strategy& strategy, Evaluator& evaluator, const Budget& budget, Logger& logger,
                         const std::string& label, const std::function<double()>& seconds);

}  // namespace portkit::tune
