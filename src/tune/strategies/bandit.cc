// Bandit ensemble: random, annealing and genetic search as arms of a UCB1 bandit. Each proposal
// comes from the arm with the highest upper confidence bound on its mean reward (the share of
// configurations measured so far that the arm's proposal beats), so the search shifts to
// whatever works on this operator.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "tune/strategies/strategy.h"

namespace portkit::tune {
namespace {

class Bandit : public Strategy {
 public:
  explicit Bandit(const StrategyOptions& o) : exploration_(OptionOr(o, "exploration", 0.7)) {}

  void Initialise(const SearchSpace& space, const Config& start, uint64_t seed) override {
    arms_.clear();
    for (const char* name : {"random", "annealing", "genetic"}) {
      Arm arm;
      arm.name = name;
      arm.strategy = std::move(MakeStrategy(name, {}).value());
      arm.strategy->Initialise(space, start, seed ^ (0x9e37ULL * (arms_.size() + 1)));
      arms_.push_back(std::move(arm));
    }
    owner_.clear();
    costs_.clear();
    best_ = std::numeric_limits<double>::infinity();
    pulls_ = 0;
    start_ = start;
  }

  std::optional<Config> Next() override {
    for (int tries = 0; tries < static_cast<int>(arms_.size()); ++tries) {
      size_t pick = 0;
      double best_score = -1;
      for (size_t i = 0; i < arms_.size(); ++i) {
        if (arms_[i].exhausted) continue;
        double score = arms_[i].pulls == 0
                           ? std::numeric_limits<double>::infinity()
                           : arms_[i].reward / arms_[i].pulls +
                                 exploration_ * std::sqrt(std::log(static_cast<double>(pulls_ + 1)) / arms_[i].pulls);
        if (score > best_score) {
          best_score = score;
          pick = i;
        }
      }
      if (best_score < 0) return std::nullopt;
      auto c = arms_[pick].strategy->Next();
      if (!c) {
        arms_[pick].exhausted = true;
        continue;
      }
      ++arms_[pick].pulls;
      ++pulls_;
      owner_[*c].push_back(pick);  // two arms may propose the same configuration
      return c;
    }
    return std::nullopt;
  }

  void Report(const Config& c, double cost) override {
    auto it = owner_.find(c);
    if (it == owner_.end()) {
      // The start configuration: every arm learns it.
      for (auto& arm : arms_) arm.strategy->Report(c, cost);
      if (cost < best_) best_ = cost;
      if (std::isfinite(cost)) costs_.insert(std::lower_bound(costs_.begin(), costs_.end(), cost), cost);
      return;
    }
    // One Report answers one proposal: the earliest arm still waiting for this configuration
    // (when two arms proposed it, the tuner reports it twice and each learns it).
    size_t a = it->second.front();
    it->second.erase(it->second.begin());
    if (it->second.empty()) owner_.erase(it);
    // Reward: the share of the configurations measured so far that this one beats (dense, in
    // [0, 1]; a rejected one earns 0), so arms are told apart long before one finds a new best.
    auto pos = std::lower_bound(costs_.begin(), costs_.end(), cost);
    double reward = costs_.empty() ? 1.0 : static_cast<double>(costs_.end() - pos) / static_cast<double>(costs_.size());
    arms_[a].strategy->Report(c, cost);
    if (std::isfinite(cost)) arms_[a].reward += reward;
    if (std::isfinite(cost)) costs_.insert(pos, cost);
    if (cost < best_) best_ = cost;
  }

 private:
  struct Arm {
    std::string name;
    std::unique_ptr<Strategy> strategy;
    double reward = 0;
    int pulls = 0;
    bool exhausted = false;
  };
  double exploration_;
  std::vector<Arm> arms_;
  std::map<Config, std::vector<size_t>> owner_;  // arms whose proposal awaits its Report
  std::vector<double> costs_;                    // sorted costs of every valid configuration reported
  double best_ = 0;
  int pulls_ = 0;
  Config start_;
};

}  // namespace

StrategyInfo BanditInfo() {
  return {"bandit",
          "UCB1 bandit over random, annealing and genetic",
          {{"exploration", 0.7, "UCB1 exploration weight"}},
          [](const StrategyOptions& o) -> std::unique_ptr<Strategy> { return std::make_unique<Bandit>(o); }};
}

}  // namespace portkit::tune
