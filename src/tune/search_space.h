#pragma once
/// A search space: named integer knobs, each with its list of values, and a constraint between
/// them. A configuration holds one value per knob, in knob order.
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace portkit::tune {

using Config = std::vector<int>;

/// Deterministic random numbers (splitmix64): the same seed gives the same search on every
/// platform (std distributions are implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  /// Uniform in [0, n); n > 0.
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }
  /// Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

struct Knob {
  std::string name;
  std::vector<int> values;
  std::string help;
};

class SearchSpace {
 public:
  /// Returns "" when a configuration is valid, else the reason it is not.
  using Constraint = std::function<std::string(const SearchSpace&, const Config&)>;

  SearchSpace() = default;
  SearchSpace(std::vector<Knob> knobs, Constraint constraint)
      : knobs_(std::move(knobs)), constraint_(std::move(constraint)) {}

  const std::vector<Knob>& knobs() const { return knobs_; }
  /// Index of a knob by name, or -1.
  int Find(std::string_view name) const;
  /// The value of knob `name` in `c` (the knob must exist).
  int Get(const Config& c, std::string_view name) const;

  /// "" when valid (values from the lists, the constraint holds, and inside the allowed set when
  /// one is set), else why not.
  std::string Check(const Config& c) const;
  bool Valid(const Config& c) const { return Check(c).empty(); }

  /// `MC=96,NC=1536,...` in knob order; the key of a configuration in files and the bank.
  std::string Key(const Config& c) const;
  /// Parses a key; errors name the knob.
  Expected<Config> Parse(std::string_view key) const;

  /// Every valid configuration, in lexicographic order of value indices.
  std::vector<Config> Enumerate() const;
  /// Number of configurations before the constraint.
  uint64_t RawSize() const;
  /// A uniformly drawn valid configuration (rejection sampling, then the enumeration).
  Config Random(Rng& rng) const;
  /// Valid configurations that differ from `c` in one knob by one step in its value list.
  std::vector<Config> Neighbours(const Config& c) const;

  /// Pins knob `name` to `values` (must be a subset of its list); errors name the knob.
  Status Restrict(std::string_view name, const std::vector<int>& values);
  /// Only these configurations (keys) are valid from now on (replay of a recorded landscape).
  void AllowOnly(std::set<std::string> keys) {
    allowed_ = std::move(keys);
    has_allowed_ = true;
  }

 private:
  std::vector<Knob> knobs_;
  Constraint constraint_;
  std::set<std::string> allowed_;
  bool has_allowed_ = false;
};

/// Parses `NAME=V1[,V2...]` given to --fix; errors name the flag value.
Status ApplyFix(SearchSpace& space, std::string_view fix);

}  // namespace portkit::tune
