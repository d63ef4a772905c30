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

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  /// Evaluates a batch; results in batch order.
  virtual std::vector<Evaluation> Evaluate(const std::vector<Config>& batch) = 0;
  /// Re-measures `candidate` and `incumbent` interleaved; false when either is rejected.
  virtual bool Confirm(const Config& candidate, const Config& incumbent, double* candidate_us,
                       double* incumbent_us) = 0;
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

 private:
  const Workload& workload();
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

 private:
  Evaluation Lookup(const Config& c) const;
  const SearchSpace& space_;
  const std::map<std::string, LandscapePoint>& points_;
};

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
