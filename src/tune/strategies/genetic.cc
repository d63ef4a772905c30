// Genetic search: a population seeded with the default and random configurations; children of
// two tournament-selected parents by uniform crossover and per-knob mutation, repaired to a
// valid configuration; the fittest `population` evaluated configurations are kept.
#include <algorithm>
#include <cmath>
#include <set>

#include "tune/strategies/strategy.h"

namespace portkit::tune {
namespace {

class Genetic : public Strategy {
 public:
  explicit Genetic(const StrategyOptions& o)
      : population_(std::max(2, static_cast<int>(OptionOr(o, "population", 8)))),
        mutation_(OptionOr(o, "mutation", 0.15)),
        tournament_(std::max(1, static_cast<int>(OptionOr(o, "tournament", 2)))) {}

  void Initialise(const SearchSpace& space, const Config& start, uint64_t seed) override {
    space_ = &space;
    rng_ = Rng(seed);
    pool_.clear();
    proposed_ = {start};
    seeds_.clear();
    for (int i = 0; i < 8 * population_ && static_cast<int>(seeds_.size()) < population_ - 1; ++i) {
      Config c = space.Random(rng_);
      if (proposed_.insert(c).second) seeds_.push_back(c);
    }
  }

  std::optional<Config> Next() override {
    if (!seeds_.empty()) {
      Config c = seeds_.front();
      seeds_.erase(seeds_.begin());
      return c;
    }
    // No evaluated parent yet (every seed rejected, or their results still pending in a batch):
    // keep exploring with random configurations instead of stopping as if the space were done.
    for (int attempt = 0; attempt < 64 && !pool_.empty(); ++attempt) {
      const Config& a = Select();
      const Config& b = Select();
      Config child = a;
      const auto& knobs = space_->knobs();
      for (size_t k = 0; k < child.size(); ++k) {
        if (rng_.Below(2)) child[k] = b[k];
        if (rng_.Unit() < mutation_) child[k] = knobs[k].values[rng_.Below(knobs[k].values.size())];
      }
      if (!space_->Valid(child) || proposed_.count(child)) continue;
      proposed_.insert(child);
      return child;
    }
    for (int attempt = 0; attempt < 64; ++attempt) {
      Config c = space_->Random(rng_);
      if (proposed_.insert(c).second) return c;
    }
    return std::nullopt;
  }

  void Report(const Config& c, double cost) override {
    if (!std::isfinite(cost)) return;
    pool_.push_back({cost, c});
    std::stable_sort(pool_.begin(), pool_.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    if (static_cast<int>(pool_.size()) > population_) pool_.resize(static_cast<size_t>(population_));
  }

 private:
  const Config& Select() {
    size_t best = rng_.Below(pool_.size());
    for (int i = 1; i < tournament_; ++i) best = std::min(best, rng_.Below(pool_.size()));
    return pool_[best].second;  // pool_ is sorted: the lower index is the fitter one
  }

  int population_;
  double mutation_;
  int tournament_;
  const SearchSpace* space_ = nullptr;
  Rng rng_{0};
  std::vector<std::pair<double, Config>> pool_;
  std::vector<Config> seeds_;
  std::set<Config> proposed_;
};

}  // namespace

StrategyInfo GeneticInfo() {
  return {"genetic",
          "tournament selection, uniform crossover, mutation",
          {{"population", 8, "configurations kept (and random seeds at the start)"},
           {"mutation", 0.15, "probability that a knob of a child takes a random value"},
           {"tournament", 2, "parents drawn per selection (the fittest wins)"}},
          [](const StrategyOptions& o) -> std::unique_ptr<Strategy> { return std::make_unique<Genetic>(o); }};
}

}  // namespace portkit::tune
