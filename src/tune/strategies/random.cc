// Random search: valid configurations drawn without replacement (a seeded shuffle of the
// space). The baseline any other strategy has to beat.
#include "tune/strategies/strategy.h"

namespace portkit::tune {
namespace {

class RandomSearch : public Strategy {
 public:
  void Initialise(const SearchSpace& space, const Config&, uint64_t seed) override {
    order_ = space.Enumerate();
    Rng rng(seed);
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng.Below(i)]);
    next_ = 0;
  }
  std::optional<Config> Next() override {
    if (next_ >= order_.size()) return std::nullopt;
    return order_[next_++];
  }
  void Report(const Config&, double) override {}

 private:
  std::vector<Config> order_;
  size_t next_ = 0;
};

}  // namespace

StrategyInfo RandomInfo() {
  return {
      "random", "uniform sampling without replacement", {}, [](const StrategyOptions&) -> std::unique_ptr<Strategy> {
        return std::make_unique<RandomSearch>();
      }};
}

}  // namespace portkit::tune
