// Exhaustive search: every valid configuration in lexicographic order. The reference for the
// other strategies (its optimum is the true one when the budget covers the space).
#include "tune/strategies/strategy.h"

namespace portkit::tune {
namespace {

class Exhaustive : public Strategy {
 public:
  void Initialise(const SearchSpace& space, const Config&, uint64_t) override {
    all_ = space.Enumerate();
    next_ = 0;
  }
  std::optional<Config> Next() override {
    if (next_ >= all_.size()) return std::nullopt;
    return all_[next_++];
  }
  void Report(const Config&, double) override {}

 private:
  std::vector<Config> all_;
  size_t next_ = 0;
};

}  // namespace

StrategyInfo ExhaustiveInfo() {
  return {
      "exhaustive", "every valid configuration, in order", {}, [](const StrategyOptions&) -> std::unique_ptr<Strategy> {
        return std::make_unique<Exhaustive>();
      }};
}

}  // namespace portkit::tune
