// Simulated annealing: walks from the default to neighbouring configurations (one knob one step
// away), accepting a worse one with probability exp(-relative loss / temperature); the
// temperature cools on every report, and a walk stuck for `restart` steps jumps to a random
// configuration.
#include <cmath>
#include <limits>
#include <set>

#include "tune/strategies/strategy.h"

namespace portkit::tune {
namespace {

class Annealing : public Strategy {
 public:
  explicit Annealing(const StrategyOptions& o)
      : t0_(OptionOr(o, "t0", 0.2)),
        cooling_(OptionOr(o, "cooling", 0.93)),
        restart_(static_cast<int>(OptionOr(o, "restart", 12))) {}

  void Initialise(const SearchSpace& space, const Config& start, uint64_t seed) override {
    space_ = &space;
    rng_ = Rng(seed);
    current_ = start;
    current_cost_ = std::numeric_limits<double>::infinity();
    temperature_ = t0_;
    proposed_.clear();
  }

  std::optional<Config> Next() override {
    auto neighbours = space_->Neighbours(current_);
    std::vector<Config> fresh;
    for (auto& n : neighbours)
      if (!proposed_.count(n)) fresh.push_back(n);
    Config pick;
    if (!fresh.empty() && stuck_ < restart_) {
      pick = fresh[rng_.Below(fresh.size())];
    } else {
      stuck_ = 0;
      for (int i = 0; i < 64; ++i) {
        pick = space_->Random(rng_);
        if (!proposed_.count(pick)) break;
      }
      if (proposed_.count(pick)) return std::nullopt;
    }
    proposed_.insert(pick);
    return pick;
  }

  void Report(const Config& c, double cost) override {
    if (!std::isfinite(current_cost_)) {
      if (std::isfinite(cost)) {
        current_ = c;
        current_cost_ = cost;
      }
      return;
    }
    bool accept = cost < current_cost_;
    if (!accept && std::isfinite(cost)) {
      double loss = (cost - current_cost_) / current_cost_;
      accept = rng_.Unit() < std::exp(-loss / std::max(temperature_, 1e-9));
    }
    if (accept) {
      if (cost >= current_cost_) ++stuck_;
      else stuck_ = 0;
      current_ = c;
      current_cost_ = cost;
    } else {
      ++stuck_;
    }
    temperature_ *= cooling_;
  }

 private:
  double t0_, cooling_;
  int restart_;
  const SearchSpace* space_ = nullptr;
  Rng rng_{0};
  Config current_;
  double current_cost_ = 0, temperature_ = 0;
  int stuck_ = 0;
  std::set<Config> proposed_;
};

}  // namespace

StrategyInfo AnnealingInfo() {
  return {"annealing",
          "simulated annealing over one-step neighbours, with restarts",
          {{"t0", 0.2, "start temperature (relative loss accepted with probability 1/e)"},
           {"cooling", 0.93, "temperature factor per evaluation"},
           {"restart", 12, "evaluations without improvement before a random restart"}},
          [](const StrategyOptions& o) -> std::unique_ptr<Strategy> { return std::make_unique<Annealing>(o); }};
}

}  // namespace portkit::tune
