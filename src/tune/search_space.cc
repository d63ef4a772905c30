#include "tune/search_space.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace portkit::tune {

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int SearchSpace::Find(std::string_view name) const {
  for (size_t i = 0; i < knobs_.size(); ++i)
    if (knobs_[i].name == name) return static_cast<int>(i);
  return -1;
}

int SearchSpace::Get(const Config& c, std::string_view name) const {
  int i = Find(name);
  if (i < 0 || static_cast<size_t>(i) >= c.size()) {
    // A programming error (a constraint naming a knob the space lacks): fail loudly in every
    // build type instead of reading out of bounds where NDEBUG removes an assert.
    std::fprintf(stderr, "portkit tune: internal error: knob %.*s not in the configuration\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return c[static_cast<size_t>(i)];
}

std::string SearchSpace::Check(const Config& c) const {
  if (c.size() != knobs_.size()) return "expected " + std::to_string(knobs_.size()) + " knobs";
  for (size_t i = 0; i < c.size(); ++i) {
    const auto& v = knobs_[i].values;
    if (std::find(v.begin(), v.end(), c[i]) == v.end())
      return knobs_[i].name + "=" + std::to_string(c[i]) + " is not one of its values";
  }
  if (constraint_) {
    std::string why = constraint_(*this, c);
    if (!why.empty()) return why;
  }
  if (has_allowed_ && !allowed_.count(Key(c))) return "not in the recorded landscape";
  return "";
}

std::string SearchSpace::Key(const Config& c) const {
  std::string out;
  for (size_t i = 0; i < knobs_.size() && i < c.size(); ++i)
    out += (i ? "," : "") + knobs_[i].name + "=" + std::to_string(c[i]);
  return out;
}

Expected<Config> SearchSpace::Parse(std::string_view key) const {
  Config c(knobs_.size(), 0);
  std::vector<bool> seen(knobs_.size(), false);
  size_t pos = 0;
  while (pos < key.size()) {
    size_t end = key.find(',', pos);
    if (end == std::string_view::npos) end = key.size();
    std::string_view item = key.substr(pos, end - pos);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return ParseError("strategy '" + std::string(key) + "': expected NAME=VALUE items");
    int k = Find(item.substr(0, eq));
    if (k < 0)
      return ParseError("strategy '" + std::string(key) + "': unknown knob " + std::string(item.substr(0, eq)));
    int v = 0;
    auto val = item.substr(eq + 1);
    auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
    if (ec != std::errc() || p != val.data() + val.size())
      return ParseError("strategy '" + std::string(key) + "': " + std::string(item.substr(0, eq)) +
                        " is not an integer");
    c[static_cast<size_t>(k)] = v;
    seen[static_cast<size_t>(k)] = true;
    pos = end + 1;
  }
  for (size_t i = 0; i < knobs_.size(); ++i)
    if (!seen[i]) return ParseError("strategy '" + std::string(key) + "': knob " + knobs_[i].name + " missing");
  return c;
}

uint64_t SearchSpace::RawSize() const {
  uint64_t n = 1;
  for (const auto& k : knobs_) n *= k.values.size();
  return n;
}

std::vector<Config> SearchSpace::Enumerate() const {
  std::vector<Config> out;
  if (knobs_.empty()) return out;
  std::vector<size_t> idx(knobs_.size(), 0);
  Config c(knobs_.size());
  while (true) {
    for (size_t i = 0; i < knobs_.size(); ++i) c[i] = knobs_[i].values[idx[i]];
    if (Valid(c)) out.push_back(c);
    size_t i = knobs_.size();
    while (i > 0) {
      --i;
      if (++idx[i] < knobs_[i].values.size()) break;
      idx[i] = 0;
      if (i == 0) return out;
    }
  }
}

Config SearchSpace::Random(Rng& rng) const {
  Config c(knobs_.size());
  for (int attempt = 0; attempt < 256; ++attempt) {
    for (size_t i = 0; i < knobs_.size(); ++i) c[i] = knobs_[i].values[rng.Below(knobs_[i].values.size())];
    if (Valid(c)) return c;
  }
  auto all = Enumerate();
  return all.empty() ? c : all[rng.Below(all.size())];
}

std::vector<Config> SearchSpace::Neighbours(const Config& c) const {
  std::vector<Config> out;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    const auto& v = knobs_[i].values;
    auto it = std::find(v.begin(), v.end(), c[i]);
    if (it == v.end()) continue;
    size_t at = static_cast<size_t>(it - v.begin());
    for (int step : {-1, 1}) {
      if ((step < 0 && at == 0) || (step > 0 && at + 1 >= v.size())) continue;
      Config n = c;
      n[i] = v[step < 0 ? at - 1 : at + 1];
      if (Valid(n)) out.push_back(n);
    }
  }
  return out;
}

Status SearchSpace::Restrict(std::string_view name, const std::vector<int>& values) {
  int k = Find(name);
  if (k < 0) {
    std::string names;
    for (const auto& kn : knobs_) names += (names.empty() ? "" : ", ") + kn.name;
    return InvalidArgument("--fix " + std::string(name) + ": unknown knob (knobs: " + names + ")");
  }
  auto& v = knobs_[static_cast<size_t>(k)].values;
  for (int x : values)
    if (std::find(v.begin(), v.end(), x) == v.end())
      return InvalidArgument("--fix " + std::string(name) + "=" + std::to_string(x) + ": not one of its values");
  v = values;
  return Status::Ok();
}

Status ApplyFix(SearchSpace& space, std::string_view fix) {
  size_t eq = fix.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == fix.size())
    return InvalidArgument("--fix '" + std::string(fix) + "': expected NAME=V1[,V2...]");
  std::vector<int> values;
  std::string_view rest = fix.substr(eq + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t end = rest.find(',', pos);
    if (end == std::string_view::npos) end = rest.size();
    int v = 0;
    auto item = rest.substr(pos, end - pos);
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || p != item.data() + item.size() || item.empty())
      return InvalidArgument("--fix '" + std::string(fix) + "': '" + std::string(item) + "' is not an integer");
    if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);  // NR=16,16: once
    pos = end + 1;
  }
  return space.Restrict(fix.substr(0, eq), values);
}

}  // namespace portkit::tune
