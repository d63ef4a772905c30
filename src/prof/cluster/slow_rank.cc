// msprof-analyze's slow-rank rule: for each step and each of compute, communication and free
// time (msprof's Free: neither computing nor communicating), the spread across ranks (max - min) / mean above 0.05
// marks the step. The rank to look at is the one with the most compute or free time (it holds the others up), or the
// least communication time (the others wait for it inside their collectives, so its own wait is short).
#include <map>

#include "prof/cluster/cluster.h"

namespace portkit::prof::cluster {

std::vector<SlowRankCheck> FindSlowRanks(const std::vector<RankBreakdown>& ranks) {
  std::vector<SlowRankCheck> out;
  if (ranks.size() < 2) return out;
  // step number -> (rank -> split); only steps every rank has are compared.
  std::map<int64_t, std::map<int64_t, const TimeSplit*>> steps;
  for (const auto& r : ranks)
    for (const auto& s : r.steps) steps[s.step][r.rank] = &s.split;
  for (const auto& [step, per_rank] : steps) {
    if (per_rank.size() != ranks.size()) continue;
    for (const char* quantity : {"compute", "communication", "free"}) {
      SlowRankCheck c;
      c.step = step;
      c.quantity = quantity;
      const bool least = c.quantity == "communication";
      double sum = 0;
      bool first = true;
      for (const auto& [rank, split] : per_rank) {
        int64_t v = c.quantity == "compute" ? split->compute : least ? split->communication : split->free();
        sum += static_cast<double>(v);
        if (first || v < c.min) {
          c.min = v;
          if (least) c.suspect = rank;
        }
        if (first || v > c.max) {
          c.max = v;
          if (!least) c.suspect = rank;
        }
        first = false;
      }
      c.mean = sum / static_cast<double>(per_rank.size());
      c.ratio = c.mean > 0 ? static_cast<double>(c.max - c.min) / c.mean : 0.0;
      c.slow = c.ratio > kSlowRankRatio;
      if (!c.slow) c.suspect = -1;
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace portkit::prof::cluster
