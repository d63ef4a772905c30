// Communication across ranks. The n-th communication task of one operation in one process group
// is the same collective on every rank (collectives run in issue order on a communicator). For
// each, msprof-analyze's split: a rank waits from its own start until the last rank has started
// (wait time), then data moves until its end (transit time); effective bandwidth = bytes /
// transit. The communication matrix adds each rank's transfers to a link: src -> dst where the
// trace records them (point-to-point), otherwise the rank's ring neighbour in its group.
#include <algorithm>
#include <map>
#include <tuple>

#include "prof/cluster/cluster.h"

namespace portkit::prof::cluster {
namespace {

/// "[0, 1, 2]" -> {0, 1, 2}; empty when it is not such a list (Kineto cuts long lists with "...").
std::vector<int64_t> ParseRankList(const std::string& text) {
  std::vector<int64_t> out;
  int64_t v = 0;
  bool in_number = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      if (v > 100000000) return {};
      v = v * 10 + (c - '0');
      in_number = true;
    } else {
      if (in_number) out.push_back(v);
      v = 0;
      in_number = false;
      if (c == '.') return {};
    }
  }
  if (in_number) out.push_back(v);
  return out;
}

double Bandwidth(int64_t bytes, int64_t ns) {
  return bytes > 0 && ns > 0 ? static_cast<double>(bytes) / static_cast<double>(ns) : -1.0;
}

}  // namespace

int64_t Collective::Duration() const {
  if (ranks.empty()) return 0;
  int64_t first = ranks.front().start, last = ranks.front().end;
  for (const auto& r : ranks) first = std::min(first, r.start), last = std::max(last, r.end);
  return last - first;
}

CommunicationReport AnalyseCommunication(const std::vector<RankTrace>& ranks) {
  CommunicationReport out;
  struct Member {
    const RankTrace* trace;
    const CommTask* comm;
  };
  // (group, op, ordinal) -> members; std::map keeps the output order stable.
  std::map<std::tuple<std::string, std::string, int64_t>, std::vector<Member>> matched;
  for (const auto& r : ranks) {
    std::map<std::pair<std::string, std::string>, int64_t> ordinal;
    for (const auto& c : r.comms) {
      int64_t n = ordinal[{c.args.group, c.args.op}]++;
      matched[{c.args.group, c.args.op, n}].push_back({&r, &c});
    }
  }
  std::map<std::tuple<std::string, int64_t, int64_t>, MatrixLink> links;
  for (auto& [key, members] : matched) {
    Collective col;
    col.group = std::get<0>(key);
    col.op = std::get<1>(key);
    col.index = std::get<2>(key);
    const DeviceTask& first_task = members.front().trace->tasks[members.front().comm->task];
    col.kernel = members.front().trace->names[static_cast<size_t>(first_task.name)];
    col.step = first_task.step >= 0 ? members.front().trace->steps[static_cast<size_t>(first_task.step)].number : -1;
    int64_t last_start = INT64_MIN;
    for (const auto& m : members) last_start = std::max(last_start, m.trace->tasks[m.comm->task].start);
    std::vector<int64_t> participants;
    for (const auto& m : members) participants.push_back(m.trace->rank);
    std::sort(participants.begin(), participants.end());
    for (const auto& m : members) {
      const DeviceTask& t = m.trace->tasks[m.comm->task];
      CollectiveRank cr;
      cr.rank = m.trace->rank;
      cr.start = t.start;
      cr.end = t.end;
      cr.wait = last_start - t.start;
      cr.transit = std::max<int64_t>(0, t.end - std::max(last_start, t.start));
      cr.bytes = m.comm->Bytes();
      cr.bandwidth_gbps = Bandwidth(cr.bytes, cr.transit);
      col.ranks.push_back(cr);

      // The link this rank's traffic goes over.
      const CollectiveArgs& a = m.comm->args;
      int64_t src = cr.rank, dst = -1;
      bool p2p = false;
      if (a.src_rank >= 0 && a.dst_rank >= 0 && a.src_rank != a.dst_rank) {
        src = a.src_rank, dst = a.dst_rank, p2p = true;
      } else {
        std::vector<int64_t> group = ParseRankList(a.group_ranks);
        if (group.size() < 2) group = participants;
        auto it = std::find(group.begin(), group.end(), cr.rank);
        if (group.size() >= 2 && it != group.end())
          dst = group[static_cast<size_t>((it - group.begin() + 1)) % group.size()];
      }
      if (dst < 0) continue;
      MatrixLink& link = links[{col.op, src, dst}];
      link.op = col.op;
      link.src = src;
      link.dst = dst;
      link.point_to_point = p2p;
      ++link.count;
      if (cr.bytes > 0) link.bytes += cr.bytes;
      link.transit += cr.transit;
    }
    std::sort(col.ranks.begin(), col.ranks.end(),
              [](const CollectiveRank& a, const CollectiveRank& b) { return a.rank < b.rank; });
    out.collectives.push_back(std::move(col));
  }
  // Collectives in time order (first start), then by key for ties.
  std::stable_sort(out.collectives.begin(), out.collectives.end(), [](const Collective& a, const Collective& b) {
    int64_t sa = INT64_MAX, sb = INT64_MAX;
    for (const auto& r : a.ranks) sa = std::min(sa, r.start);
    for (const auto& r : b.ranks) sb = std::min(sb, r.start);
    return sa < sb;
  });

  // Slow links: below kSlowLinkRatio x the median bandwidth of the same operation.
  std::map<std::string, std::vector<double>> per_op;
  for (auto& [key, link] : links) {
    link.bandwidth_gbps = Bandwidth(link.bytes, link.transit);
    if (link.bandwidth_gbps > 0) per_op[link.op].push_back(link.bandwidth_gbps);
  }
  for (auto& [op, v] : per_op) std::sort(v.begin(), v.end());
  for (auto& [key, link] : links) {
    const auto& v = per_op[link.op];
    if (link.bandwidth_gbps > 0 && v.size() >= 2) {
      double median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
      link.slow = link.bandwidth_gbps < kSlowLinkRatio * median;
      out.slow_links += link.slow;
    }
    out.matrix.push_back(link);
  }
  return out;
}

}  // namespace portkit::prof::cluster
