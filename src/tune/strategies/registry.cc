#include <charconv>
#include <cstdio>
#include <cstring>

#include "tune/strategies/strategy.h"

namespace portkit::tune {

const std::vector<StrategyInfo>& AllStrategies() {
  static const std::vector<StrategyInfo> kAll = {
      ExhaustiveInfo(), RandomInfo(), AnnealingInfo(), GeneticInfo(), BanditInfo(), GuidedInfo(),
  };
  return kAll;
}

double OptionOr(const StrategyOptions& o, const std::string& name, double fallback) {
  auto it = o.find(name);
  return it == o.end() ? fallback : it->second;
}

Expected<std::unique_ptr<Strategy>> MakeStrategy(std::string_view name, const std::vector<std::string>& options) {
  for (const auto& info : AllStrategies()) {
    if (info.name != name) continue;
    StrategyOptions parsed;
    for (const auto& opt : info.options) parsed[opt.name] = opt.default_value;
    for (const auto& item : options) {
      size_t eq = item.find('=');
      std::string key = item.substr(0, eq);
      if (eq == std::string::npos || !parsed.count(key)) {
        std::string known;
        for (const auto& opt : info.options) known += (known.empty() ? "" : ", ") + opt.name;
        return InvalidArgument("--strategy-opt " + item + ": strategy " + info.name + " has no option '" + key +
                               "' (options: " + (known.empty() ? "none" : known) + ")");
      }
      std::string value = item.substr(eq + 1);
      double v = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || p != value.data() + value.size())
        return InvalidArgument("--strategy-opt " + item + ": '" + value + "' is not a number");
      parsed[key] = v;
    }
    return info.make(parsed);
  }
  std::string known;
  for (const auto& info : AllStrategies()) known += (known.empty() ? "" : ", ") + info.name;
  return InvalidArgument("--strategy " + std::string(name) + ": unknown strategy (strategies: " + known + ")");
}

std::string StrategyHelp() {
  std::string out = "Strategies (--strategy NAME, options with --strategy-opt NAME=VALUE):\n";
  for (const auto& info : AllStrategies()) {
    out += "  " + info.name + std::string(info.name.size() < 12 ? 12 - info.name.size() : 1, ' ') + info.summary + "\n";
    for (const auto& opt : info.options) {
      char def[32];
      std::snprintf(def, sizeof def, "%g", opt.default_value);
      out += "      " + opt.name + "=" + def +
             std::string(opt.name.size() + std::strlen(def) < 20 ? 20 - opt.name.size() - std::strlen(def) : 1, ' ') +
             opt.help + "\n";
    }
  }
  return out;
}

}  // namespace portkit::tune
