// Bandit ensemble: random, annealing and genetic search as arms of a UCB1 bandit. Each proposal
// comes from the arm with the highest upper confidence bound on its reward (1 when its
// configuration improved the best cost so far), so the search shifts to whatever works on this
// operator.
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
      owner_[*c] = pick;
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
      return;
    }
    Arm& arm = arms_[it->second];
    arm.strategy->Report(c, cost);
    if (cost < best_) {
      best_ = cost;
      arm.reward += 1;
    }
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
  std::map<Config, size_t> owner_;
  double best_ = 0;
  int pulls_ = 0;
  Config start_;
};

}  // namespace

StrategyInfo BanditInfo() {
  return {"bandit", "UCB1 bandit over random, annealing and genetic (default)",
          {{"exploration", 0.7, "UCB1 exploration weight"}},
          [](const StrategyOptions& o) -> std::unique_ptr<Strategy> { return std::make_unique<Bandit>(o); }};
}

}  // namespace portkit::tune
