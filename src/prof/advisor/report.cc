#include <algorithm>
#include <cstdio>
#include <map>

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
  std::snprintf(buf, sizeof buf, "%.1f%%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

std::vector<std::pair<std::string, int64_t>> TopByTime(const Profile& p, bool device, size_t n) {
  std::map<std::string, int64_t> totals;
  for (const auto& e : p.events)
    if (device ? p.IsDevice(e) : e.kind == "cpu_op") totals[e.name] += e.dur;
  std::vector<std::pair<std::string, int64_t>> v(totals.begin(), totals.end());
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
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
