#pragma once
/// A search strategy proposes configurations and learns from their cost. Adding one is one file
/// in strategies/ with a `StrategyInfo <Name>Info()` and one line in registry.cc.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tune/search_space.h"

namespace portkit::tune {

/// Option of a strategy (`--strategy-opt NAME=VALUE`); the table also renders `--help`.
struct StrategyOption {
  std::string name;
  double default_value;
  std::string help;
};
using StrategyOptions = std::map<std::string, double>;

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// Starts a search over `space` from `start` (the default strategy; its cost is the first
  /// Report). Same seed, same reports: same proposals.
  virtual void Initialise(const SearchSpace& space, const Config& start, uint64_t seed) = 0;
  /// The next configuration to evaluate, or nullopt when there is nothing left to propose. May be
  /// called several times before the matching Reports (parallel builds).
  virtual std::optional<Config> Next() = 0;
  /// The cost (microseconds per call) of an evaluated configuration; +inf when it was rejected.
  virtual void Report(const Config& c, double cost) = 0;
};

struct StrategyInfo {
  std::string name;
  std::string summary;
  std::vector<StrategyOption> options;
  std::unique_ptr<Strategy> (*make)(const StrategyOptions& options);
};

/// Every strategy, in registry order.
const std::vector<StrategyInfo>& AllStrategies();
/// A strategy by name with `NAME=VALUE` options; errors name the strategy and the option.
Expected<std::unique_ptr<Strategy>> MakeStrategy(std::string_view name, const std::vector<std::string>& options);
/// The strategies and their options tables, for --help.
std::string StrategyHelp();

/// Helper for strategies: options with defaults filled in.
double OptionOr(const StrategyOptions& o, const std::string& name, double fallback);

StrategyInfo ExhaustiveInfo();
StrategyInfo RandomInfo();
StrategyInfo AnnealingInfo();
StrategyInfo GeneticInfo();
StrategyInfo BanditInfo();
StrategyInfo GuidedInfo();

}  // namespace portkit::tune
