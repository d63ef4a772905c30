#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "prof/advisor/rule_list.h"

namespace portkit::prof {

std::string Duration(int64_t ns) {
  char buf[32];
  if (ns >= 1'000'000) std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  else std::snprintf(buf, sizeof buf, "%.1f us", static_cast<double>(ns) / 1e3);
  return buf;
}

std::string Share(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

std::vector<std::pair<std::string, int64_t>> TopByTime(const Profile& p, bool device, size_t n) {
  std::map<std::string, int64_t> totals;
  for (const auto& e : p.events)
    if (device ? p.IsDevice(e) : e.kind == "cpu_op") totals[e.name] += e.dur;
  std::vector<std::pair<std::string, int64_t>> v(totals.begin(), totals.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (v.size() > n) v.resize(n);
  return v;
}

std::vector<std::pair<std::string, int64_t>> TimeSplit(const Breakdown& b) {
  std::vector<std::pair<std::string, int64_t>> v = {{"host operators", b.host_ops}};
  if (b.device_busy > 0) {
    v.push_back({"device compute", b.compute});
    v.push_back({"device communication", b.communication});
    v.push_back({"device memcpy/memset", b.memcpy});
    v.push_back({"device idle", b.wall - b.device_busy});
  }
  return v;
}

}  // namespace portkit::prof

namespace portkit::prof {

std::vector<int64_t> SelfTimes(const Profile& p) {
  std::vector<int64_t> self(p.events.size(), 0);
  std::vector<size_t> ops;
  for (size_t i = 0; i < p.events.size(); ++i)
    if (p.events[i].kind == "cpu_op") ops.push_back(i);
  // Parents before their children: by thread, start, longest first.
  std::stable_sort(ops.begin(), ops.end(), [&](size_t a, size_t b) {
    const ProfEvent &x = p.events[a], &y = p.events[b];
    return std::tie(x.trace, x.pid, x.tid, x.ts, y.dur) < std::tie(y.trace, y.pid, y.tid, y.ts, x.dur);
  });
  std::vector<size_t> stack;
  for (size_t k = 0; k < ops.size(); ++k) {
    const ProfEvent& e = p.events[ops[k]];
    self[ops[k]] = e.dur;
    if (k > 0) {
      const ProfEvent& prev = p.events[ops[k - 1]];
      if (std::tie(prev.trace, prev.pid, prev.tid) != std::tie(e.trace, e.pid, e.tid)) stack.clear();
    }
    while (!stack.empty() && p.events[stack.back()].end() <= e.ts) stack.pop_back();
    if (!stack.empty()) {
      const ProfEvent& parent = p.events[stack.back()];
      self[stack.back()] -= std::min(e.end(), parent.end()) - e.ts;
    }
    stack.push_back(ops[k]);
  }
  for (auto& v : self) v = std::max<int64_t>(v, 0);
  return self;
}

bool InSteps(const Profile& p, const ProfEvent& e) {
  if (p.steps.empty()) return true;
  auto it = std::upper_bound(p.steps.begin(), p.steps.end(), std::make_pair(e.trace, e.ts),
                             [](const std::pair<int64_t, int64_t>& k, const Profile::Step& s) {
                               return k < std::make_pair(s.trace, s.start);
                             });
  if (it == p.steps.begin()) return false;
  --it;
  return it->trace == e.trace && e.ts < it->end;
}

std::vector<HostOpStat> HostOpTable(const Profile& p, bool by_shape) {
  auto self = SelfTimes(p);
  std::map<std::pair<std::string, std::string>, HostOpStat> rows;
  for (size_t i = 0; i < p.events.size(); ++i) {
    const ProfEvent& e = p.events[i];
    if (e.kind != "cpu_op") continue;
    std::string dims = by_shape ? e.input_dims : "";
    HostOpStat& r = rows[{e.name, dims}];
    r.name = e.name, r.input_dims = dims;
    ++r.count, r.self_ns += self[i], r.total_ns += e.dur;
  }
  std::vector<HostOpStat> out;
  for (auto& [k, r] : rows) out.push_back(std::move(r));
  std::stable_sort(out.begin(), out.end(),
                   [](const HostOpStat& a, const HostOpStat& b) { return a.self_ns > b.self_ns; });
  return out;
}

}  // namespace portkit::prof
