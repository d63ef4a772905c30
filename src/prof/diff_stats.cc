#include "prof/diff_stats.h"

#include <algorithm>
#include <random>

namespace portkit::prof {

Resamples DrawResamples(const RunSizes& sizes, int count, uint64_t seed) {
  std::vector<size_t> offsets, lengths;
  size_t at = 0;
  for (size_t n : sizes) {
    if (n) offsets.push_back(at), lengths.push_back(n);
    at += n;
  }
  Resamples out;
  out.lengths = lengths;
  if (lengths.empty() || count <= 0) return out;
  std::mt19937_64 gen(seed);
  out.draws.resize(static_cast<size_t>(count));
  out.runs.resize(static_cast<size_t>(count));
  const size_t runs = lengths.size();
  for (size_t d = 0; d < out.draws.size(); ++d) {
    auto& draw = out.draws[d];
    draw.reserve(at);
    for (size_t r = 0; r < runs; ++r) {
      // With one run there is no run level to resample: drawing it again changes nothing.
      size_t run = runs == 1 ? 0 : static_cast<size_t>(gen() % runs);
      out.runs[d].push_back(static_cast<uint32_t>(run));
      for (size_t s = 0; s < lengths[run]; ++s)
        draw.push_back(static_cast<uint32_t>(offsets[run] + gen() % lengths[run]));
    }
  }
  return out;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  double upper = values[mid];
  if (values.size() % 2) return upper;
  double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

double Quantile(const std::vector<double>& sorted_values, double q) {
  if (sorted_values.empty()) return 0;
  double pos = q * static_cast<double>(sorted_values.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  if (lo + 1 >= sorted_values.size()) return sorted_values.back();
  double frac = pos - static_cast<double>(lo);
  return sorted_values[lo] + frac * (sorted_values[lo + 1] - sorted_values[lo]);
}

std::optional<ChangeInterval> MedianChangeInterval(const std::vector<double>& base, const Resamples& base_draws,
                                                   const std::vector<double>& compare, const Resamples& compare_draws,
                                                   double confidence) {
  if (base.size() < 2 || compare.size() < 2) return std::nullopt;
  double base_median = Median(base);
  if (base_median == 0) return std::nullopt;
  ChangeInterval out;
  out.percent = 100.0 * (Median(compare) / base_median - 1.0);
  const size_t n = std::min(base_draws.draws.size(), compare_draws.draws.size());
  std::vector<double> changes, scratch;
  changes.reserve(n);
  auto draw_median = [&scratch](const std::vector<double>& values, const std::vector<uint32_t>& draw) {
    scratch.clear();
    for (uint32_t i : draw) scratch.push_back(values[i]);
    return Median(scratch);
  };
  for (size_t i = 0; i < n; ++i) {
    double b = draw_median(base, base_draws.draws[i]);
    if (b == 0) continue;
    changes.push_back(100.0 * (draw_median(compare, compare_draws.draws[i]) / b - 1.0));
  }
  if (changes.empty()) return std::nullopt;
  std::sort(changes.begin(), changes.end());
  double tail = (1.0 - confidence) / 2;
  out.low = Quantile(changes, tail);
  out.high = Quantile(changes, 1.0 - tail);
  return out;
}

double WorkTime(const PositionTable& positions, const std::vector<std::vector<uint32_t>>& runs) {
  std::vector<double> per_run;
  per_run.reserve(runs.size());
  for (const auto& steps : runs) {
    if (steps.empty()) continue;
    double sum = 0;
    for (const auto& row : positions) {
      double least = row[steps[0]];
      for (uint32_t s : steps) least = std::min(least, row[s]);
      sum += least;
    }
    per_run.push_back(sum);
  }
  return Median(std::move(per_run));
}

std::vector<std::vector<uint32_t>> AllSteps(const RunSizes& sizes) {
  std::vector<std::vector<uint32_t>> out;
  uint32_t at = 0;
  for (size_t n : sizes) {
    if (!n) continue;
    out.emplace_back(n);
    for (auto& i : out.back()) i = at++;
  }
  return out;
}

namespace {

/// The drawn runs of resample `d`: its index list cut into one block per drawn run.
std::vector<std::vector<uint32_t>> DrawnRuns(const Resamples& r, size_t d) {
  std::vector<std::vector<uint32_t>> out;
  auto it = r.draws[d].begin();
  for (uint32_t run : r.runs[d]) {
    auto len = static_cast<std::ptrdiff_t>(r.lengths[run]);
    out.emplace_back(it, it + len);
    it += len;
  }
  return out;
}

size_t TotalSteps(const RunSizes& sizes) {
  size_t n = 0;
  for (size_t s : sizes) n += s;
  return n;
}

}  // namespace

std::optional<ChangeInterval> WorkChangeInterval(const PositionTable& base, const RunSizes& base_sizes,
                                                 const Resamples& base_draws, const PositionTable& compare,
                                                 const RunSizes& compare_sizes, const Resamples& compare_draws,
                                                 double confidence) {
  if (base.empty() || compare.empty() || TotalSteps(base_sizes) < 2 || TotalSteps(compare_sizes) < 2)
    return std::nullopt;
  const double base_work = WorkTime(base, AllSteps(base_sizes));
  if (base_work <= 0) return std::nullopt;
  ChangeInterval out;
  out.percent = 100.0 * (WorkTime(compare, AllSteps(compare_sizes)) / base_work - 1.0);
  const size_t n = std::min(base_draws.draws.size(), compare_draws.draws.size());
  std::vector<double> changes;
  changes.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    double b = WorkTime(base, DrawnRuns(base_draws, i));
    if (b <= 0) continue;
    changes.push_back(100.0 * (WorkTime(compare, DrawnRuns(compare_draws, i)) / b - 1.0));
  }
  if (changes.empty()) return std::nullopt;
  std::sort(changes.begin(), changes.end());
  const double tail = (1.0 - confidence) / 2;
  out.low = Quantile(changes, tail);
  out.high = Quantile(changes, 1.0 - tail);
  return out;
}

Verdict SignificantVerdict(const ChangeInterval& change, double limit) {
  if (change.percent > limit && change.low > 0) return Verdict::kRegressed;
  if (change.low <= 0 && change.high > limit) return Verdict::kInconclusive;
  return Verdict::kPass;
}

}  // namespace portkit::prof
