#include "tune/search_quality.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "core/log.h"
#include "tune/operators/operator.h"
#include "tune/session.h"
#include "tune/strategies/strategy.h"

namespace portkit::tune {

double SearchQuality::HitRate(double margin) const {
  if (ratio.empty()) return 0;
  size_t hits = 0;
  for (double r : ratio) hits += r <= 1 + margin;
  return static_cast<double>(hits) / static_cast<double>(ratio.size());
}

double SearchQuality::Percentile(double p) const {
  if (ratio.empty()) return 0;
  std::vector<double> v = ratio;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size())));
  return v[rank == 0 ? 0 : rank - 1];
}

Expected<std::vector<SearchQuality>> ReplaySearchQuality(const Landscape& landscape, const std::string& strategy,
                                                         const std::vector<std::string>& options, const Budget& budget,
                                                         int seeds, double margin) {
  // The recording machine's space, as the session builds it for a replay.
  int threads = 1;
  if (size_t at = landscape.validators.find("cores="); at != std::string::npos)
    threads = std::max(1, std::atoi(landscape.validators.c_str() + at + 6));
  std::vector<SearchQuality> out;
  for (const auto& desc : landscape.ops) {
    std::string sig = Signature(desc);
    auto pit = landscape.points.find(sig);
    if (pit == landscape.points.end()) continue;
    const auto& points = pit->second;
    auto op = MakeOperator(desc);
    if (!op.ok()) return op.status();
    SearchSpace space = (*op)->Space(threads);
    for (const auto& f : landscape.fixes)
      if (Status st = ApplyFix(space, f); !st.ok()) return InvalidArgument(landscape.file + ": fix: " + st.message());
    Config start = (*op)->DefaultConfig(space, threads);
    std::set<std::string> keys;
    SearchQuality q;
    q.op = desc.name + " (" + desc.type + ")";
    q.optimum_us = kRejected;
    for (const auto& [key, p] : points) {
      keys.insert(key);
      if (p.status == "ok") q.optimum_us = std::min(q.optimum_us, p.time_us);
    }
    q.configs = keys.size();
    for (const auto& [key, p] : points) q.near_optimum += p.status == "ok" && p.time_us <= q.optimum_us * (1 + margin);
    space.AllowOnly(std::move(keys));
    if (!points.count(space.Key(start)) || !std::isfinite(q.optimum_us))
      return InvalidArgument(landscape.file + ": " + q.op + ": the default strategy or every configuration is missing");
    for (int s = 0; s < seeds; ++s) {
      auto made = MakeStrategy(strategy, options);
      if (!made.ok()) return made.status();
      (*made)->Initialise(space, start, OperatorSeed(static_cast<uint64_t>(s), sig));
      ReplayEvaluator evaluator(space, points);
      Logger quiet(nullptr, [] { return std::chrono::system_clock::time_point{}; });
      TuneOutcome o =
          TuneOperator(space, start, std::nullopt, **made, evaluator, budget, quiet, "", [] { return 0.0; });
      q.ratio.push_back(o.best_us / q.optimum_us);
      q.evaluations.push_back(o.evaluations);
    }
    out.push_back(std::move(q));
  }
  return out;
}

}  // namespace portkit::tune
