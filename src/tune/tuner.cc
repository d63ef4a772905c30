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

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

Comparison CompareSamples(const std::vector<double>& candidate, const std::vector<double>& incumbent, double min_gain) {
  Comparison c;
  c.candidate_us = Median(candidate);
  c.incumbent_us = Median(incumbent);
  size_t n = std::min(candidate.size(), incumbent.size());
  c.pairs = static_cast<int>(n);
  if (n == 0) return c;
  std::vector<double> ratios;
  for (size_t i = 0; i < n; ++i) ratios.push_back(candidate[i] > 0 ? incumbent[i] / candidate[i] : 0.0);
  std::sort(ratios.begin(), ratios.end());
  c.speedup = Median(ratios);
  if (n < 5) {
    c.speedup = c.candidate_us > 0 ? c.incumbent_us / c.candidate_us : 0;
    c.lower_bound = c.speedup;
    c.significant = c.speedup >= 1 + min_gain;
    return c;
  }
  // Sign-test bound: the largest k with P(Binomial(n, 1/2) <= k - 1) <= 0.10.
  double term = std::pow(0.5, static_cast<double>(n)), cdf = 0;
  size_t k = 0;
  for (size_t j = 0; j < n; ++j) {  // cdf = P(X <= j)
    cdf += term;
    if (cdf > 0.10) break;
    k = j + 1;
    term = term * static_cast<double>(n - j) / static_cast<double>(j + 1);
  }
  c.lower_bound = k >= 1 ? ratios[k - 1] : 0;
  c.significant = k >= 1 && c.lower_bound > 1.0 && c.speedup >= 1 + min_gain;
  return c;
}

CompileEvaluator::CompileEvaluator(const TunableOperator& op, const SearchSpace& space, Builder& builder,
                                   MeasureOptions measure, Landscape* landscape, Logger& logger)
    : op_(op),
      space_(space),
      builder_(builder),
      measure_(measure),
      landscape_(landscape),
      logger_(logger),
      signature_(Signature(op.desc())) {
  // The interleaved confirmation runs two candidates in one child: its timeout covers both.
  measure_.timeout_seconds =
      std::max(measure_.timeout_seconds, CandidateTimeoutSeconds(op.Flops(), measure_.repeats, 2));
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
  std::vector<Evaluation> out;
  if (!failure_.empty()) {
    for (const auto& c : batch) out.push_back({c, "infrastructure", kRejected, failure_});
    return out;
  }
  std::vector<std::string> sources;
  for (const auto& c : batch) sources.push_back(op_.Source(space_, c));
  auto builds = builder_.BuildAll(sources);
  // A compile error is a property of the configuration only while the toolchain still builds a
  // known-good source (the operator's default, freshly, not from the cache); otherwise the
  // compiler, the disk or the cache folder is broken and the run stops.
  for (size_t i = 0; i < batch.size() && failure_.empty(); ++i)
    if (!builds[i].ok && builds[i].infrastructure) failure_ = "cannot build candidates: " + builds[i].error;
  for (size_t i = 0; i < batch.size() && failure_.empty(); ++i)
    if (!builds[i].ok) {
      std::string why = builder_.CheckToolchain(op_.Source(space_, op_.DefaultConfig(space_, 1)));
      if (!why.empty())
        failure_ = "the toolchain cannot build a known-good kernel (" + why +
                   "); the candidate's error was: " + builds[i].error;
      break;
    }
  const Workload* w = failure_.empty() ? &workload() : nullptr;
  for (size_t i = 0; i < batch.size(); ++i) {
    Evaluation e;
    e.config = batch[i];
    std::string key = space_.Key(batch[i]);
    if (!failure_.empty()) {
      e.status = "infrastructure";
      e.detail = failure_;
      out.push_back(std::move(e));
      continue;  // not a property of the configuration: not recorded
    }
    if (!builds[i].ok) {
      e.status = "compile_error";
      e.detail = builds[i].error;
      logger_.Warning("candidate " + key + " does not compile: " + e.detail);
    } else {
      objects_[key] = builds[i].shared_object;
      Measurement m = Measure(builds[i].shared_object, *w, measure_);
      e.status = MeasureStatusName(m.status);
      e.detail = m.detail;
      if (m.status == MeasureStatus::kOk) e.time_us = m.median_us;
      else logger_.Warning("candidate " + key + " rejected (" + e.status + "): " + m.detail);
    }
    if (landscape_) {
      landscape_->Add(signature_, key, {e.status, std::isfinite(e.time_us) ? e.time_us : 0.0});
      if (!landscape_->stream_error().empty() && failure_.empty()) failure_ = landscape_->stream_error();
    }
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

std::optional<Comparison> CompileEvaluator::Compare(const Config& candidate, const Config& incumbent) {
  auto a = objects_.find(space_.Key(candidate));
  auto b = objects_.find(space_.Key(incumbent));
  if (a == objects_.end() || b == objects_.end() || !failure_.empty()) return std::nullopt;
  auto [ma, mb] = MeasureInterleaved(a->second, b->second, workload(), measure_);
  if (ma.status != MeasureStatus::kOk || mb.status != MeasureStatus::kOk) return std::nullopt;
  return CompareSamples(ma.samples_us, mb.samples_us);
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

std::optional<Comparison> ReplayEvaluator::Compare(const Config& candidate, const Config& incumbent) {
  Evaluation a = Lookup(candidate), b = Lookup(incumbent);
  if (a.status != "ok" || b.status != "ok") return std::nullopt;
  return CompareSamples({a.time_us}, {b.time_us});
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
  if (!evaluator.failure().empty()) {
    r.stop_reason = "infrastructure failure";  // the session stops the run
    return r;
  }
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
    if (!evaluator.failure().empty()) {
      r.stop_reason = "infrastructure failure";
      break;
    }
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
  logger.Info(label + ": " + std::to_string(r.evaluations) + " candidates evaluated (" + std::to_string(r.rejected) +
              " rejected), stopped: " + r.stop_reason + ".");
  return r;
}

}  // namespace portkit::tune
