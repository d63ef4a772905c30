#include "tune/tuner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace portkit::tune {
namespace {

std::string Us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", us);
  return buf;
}

}  // namespace

CompileEvaluator::CompileEvaluator(const TunableOperator& op, const SearchSpace& space, Builder& builder,
                                   MeasureOptions measure, Landscape* landscape, Logger& logger)
    : op_(op), space_(space), builder_(builder), measure_(measure), landscape_(landscape), logger_(logger),
      signature_(Signature(op.desc())) {
  // The interleaved confirmation runs two candidates in one child: its timeout covers both.
  measure_.timeout_seconds = std::max(measure_.timeout_seconds, CandidateTimeoutSeconds(op.Flops(), measure_.repeats, 2));
}

int CandidateTimeoutSeconds(double flops, int repeats, int candidates) {
  // A slow candidate (2 GFLOP/s) runs one validation call, one calibration call and `repeats`
  // timed calls per candidate; 60 s on top for loading and a loaded machine.
  double seconds = 60.0 + candidates * (repeats + 2) * flops / 2e9;
  return static_cast<int>(std::min(seconds, 3600.0));
}

const Workload& CompileEvaluator::workload() {
  if (!workload_) workload_ = op_.MakeWorkload();
  return *workload_;
}

std::vector<Evaluation> CompileEvaluator::Evaluate(const std::vector<Config>& batch) {
  std::vector<std::string> sources;
  for (const auto& c : batch) sources.push_back(op_.Source(space_, c));
  auto builds = builder_.BuildAll(sources);
  const Workload& w = workload();
  std::vector<Evaluation> out;
  for (size_t i = 0; i < batch.size(); ++i) {
    Evaluation e;
    e.config = batch[i];
    std::string key = space_.Key(batch[i]);
    if (!builds[i].ok) {
      e.status = "compile_error";
      e.detail = builds[i].error;
      logger_.Warning("candidate " + key + " does not compile: " + e.detail);
    } else {
      objects_[key] = builds[i].shared_object;
      Measurement m = Measure(builds[i].shared_object, w, measure_);
      e.status = MeasureStatusName(m.status);
      e.detail = m.detail;
      if (m.status == MeasureStatus::kOk) e.time_us = m.median_us;
      else logger_.Warning("candidate " + key + " rejected (" + e.status + "): " + m.detail);
    }
    if (landscape_) landscape_->Add(signature_, key, {e.status, std::isfinite(e.time_us) ? e.time_us : 0.0});
    out.push_back(std::move(e));
  }
  return out;
}

bool CompileEvaluator::Confirm(const Config& candidate, const Config& incumbent, double* candidate_us,
                               double* incumbent_us) {
  auto a = objects_.find(space_.Key(candidate));
  auto b = objects_.find(space_.Key(incumbent));
  if (a == objects_.end() || b == objects_.end()) return false;
  auto [ma, mb] = MeasureInterleaved(a->second, b->second, workload(), measure_);
  if (ma.status != MeasureStatus::kOk || mb.status != MeasureStatus::kOk) return false;
  *candidate_us = ma.median_us;
  *incumbent_us = mb.median_us;
  return true;
}

ReplayEvaluator::ReplayEvaluator(const SearchSpace& space, const std::map<std::string, LandscapePoint>& points)
    : space_(space), points_(points) {}

Evaluation ReplayEvaluator::Lookup(const Config& c) const {
  Evaluation e;
  e.config = c;
  auto it = points_.find(space_.Key(c));
  if (it == points_.end()) {
    e.status = "not_recorded";
    e.detail = "not in the landscape";
    return e;
  }
  e.status = it->second.status;
  if (e.status == "ok") e.time_us = it->second.time_us;
  return e;
}

std::vector<Evaluation> ReplayEvaluator::Evaluate(const std::vector<Config>& batch) {
  std::vector<Evaluation> out;
  for (const auto& c : batch) out.push_back(Lookup(c));
  return out;
}

bool ReplayEvaluator::Confirm(const Config& candidate, const Config& incumbent, double* candidate_us,
                              double* incumbent_us) {
  Evaluation a = Lookup(candidate), b = Lookup(incumbent);
  if (a.status != "ok" || b.status != "ok") return false;
  *candidate_us = a.time_us;
  *incumbent_us = b.time_us;
  return true;
}

TuneOutcome TuneOperator(const SearchSpace& space, const Config& start, const std::optional<Config>& stored,
                         Strategy& strategy, Evaluator& evaluator, const Budget& budget, Logger& logger,
                         const std::string& label, const std::function<double()>& seconds) {
  TuneOutcome r;
  double t0 = seconds();
  r.default_config = start;
  std::map<Config, double> seen;
  // Baselines: the default strategy and, when re-tuning, the stored one.
  std::vector<Config> baselines = {start};
  if (stored && *stored != start) baselines.push_back(*stored);
  auto base = evaluator.Evaluate(baselines);
  r.default_status = base[0].status;
  r.default_us = base[0].time_us;
  seen[start] = r.default_us;
  r.best = start;
  r.best_us = r.default_us;
  if (stored) {
    r.stored = stored;
    r.stored_us = *stored == start ? r.default_us : base[1].time_us;
    seen[*stored] = r.stored_us;
    if (r.stored_us < r.best_us) {
      r.best = *stored;
      r.best_us = r.stored_us;
    }
  }
  if (std::isfinite(r.default_us)) logger.Info(label + ": default strategy " + Us(r.default_us) + ".");
  else logger.Warning(label + ": the default strategy was rejected (" + base[0].status + ": " + base[0].detail + ")");
  strategy.Report(start, r.default_us);
  if (stored && *stored != start) strategy.Report(*stored, r.stored_us);

  int since_improvement = 0, proposals = 0;
  const int max_proposals = budget.max_evals * 50 + 1000;
  while (true) {
    if (r.evaluations >= budget.max_evals) {
      r.stop_reason = "max-evals reached";
      break;
    }
    if (budget.max_seconds > 0 && seconds() - t0 >= budget.max_seconds) {
      r.stop_reason = "max-seconds reached";
      break;
    }
    if (budget.patience > 0 && since_improvement >= budget.patience) {
      r.stop_reason = "no improvement in " + std::to_string(budget.patience) + " evaluations";
      break;
    }
    std::vector<Config> batch;
    std::set<Config> in_batch;
    std::vector<Config> duplicates;  // proposed again within this batch: answered with its result
    int want = std::min(std::max(1, budget.batch), budget.max_evals - r.evaluations);
    bool exhausted = false;
    while (static_cast<int>(batch.size()) < want && proposals < max_proposals) {
      auto c = strategy.Next();
      ++proposals;
      if (!c) {
        exhausted = true;
        break;
      }
      if (auto it = seen.find(*c); it != seen.end()) {
        strategy.Report(*c, it->second);  // already measured: answer from the cache, no budget used
        continue;
      }
      if (in_batch.count(*c)) {
        duplicates.push_back(*c);
        continue;
      }
      if (!space.Valid(*c)) {
        strategy.Report(*c, kRejected);
        continue;
      }
      in_batch.insert(*c);
      batch.push_back(*c);
    }
    if (batch.empty()) {
      r.stop_reason = exhausted ? "search space exhausted" : "strategy repeats itself";
      break;
    }
    auto results = evaluator.Evaluate(batch);
    for (auto& e : results) {
      ++r.evaluations;
      ++since_improvement;
      r.history.push_back(e.config);
      seen[e.config] = e.time_us;
      if (!std::isfinite(e.time_us)) ++r.rejected;
      if (std::isfinite(e.time_us) && e.time_us < r.best_us) {
        double cand = e.time_us, inc = r.best_us;
        // A new best is accepted only when it also wins a re-measurement interleaved with the
        // incumbent (noise on a shared machine produces false bests).
        bool confirmed = !std::isfinite(r.best_us) || r.best == e.config ||
                         (evaluator.Confirm(e.config, r.best, &cand, &inc) && cand < inc);
        if (confirmed) {
          logger.Info(label + ": new best " + space.Key(e.config) + " " + Us(cand) + " (was " +
                      (std::isfinite(r.best_us) ? Us(inc) : std::string("none")) + "), evaluation " +
                      std::to_string(r.evaluations) + ".");
          r.best = e.config;
          r.best_us = cand;
          since_improvement = 0;
          e.time_us = cand;
        } else {
          logger.Debug(label + ": " + space.Key(e.config) + " not confirmed against the incumbent.");
        }
      }
      strategy.Report(e.config, e.time_us);
    }
    for (const auto& c : duplicates) strategy.Report(c, seen[c]);
  }
  logger.Info(label + ": " + std::to_string(r.evaluations) + " candidates evaluated (" +
              std::to_string(r.rejected) + " rejected), stopped: " + r.stop_reason + ".");
  return r;
}

}  // namespace portkit::tune
