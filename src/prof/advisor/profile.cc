#include <algorithm>
#include <map>
#include <set>

#include "prof/advisor/advisor.h"

namespace portkit::prof {

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kHigh: return "high";
    case Severity::kMedium: return "medium";
    case Severity::kLow: return "low";
    case Severity::kInfo: return "info";
  }
  return "info";
}

Expected<Profile> Profile::Load(Store& store, const std::filesystem::path& data_dir) {
  Profile p;
  p.data_dir = data_dir;
  auto facts = target::LoadTarget(data_dir, "");
  if (!facts.ok()) return facts.status();
  p.target = std::move(*facts);
  auto q = store.db().Prepare(
      "SELECT s.value, e.kind, e.trace, e.ts, e.dur, e.pid, e.tid, COALESCE(e.input_dims, ''), "
      "COALESCE(e.correlation, -1) "
      "FROM events e JOIN strings s ON s.id = e.name ORDER BY e.trace, e.pid, e.tid, e.ts");
  if (!q.ok()) return q.status();
  std::map<std::pair<int64_t, std::string>, Step> steps;
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    ProfEvent e;
    e.name = q->Text(0);
    e.kind = q->Text(1);
    e.trace = q->Int(2);
    e.ts = q->Int(3);
    e.dur = q->Int(4);
    e.pid = q->Int(5);
    e.tid = q->Int(6);
    e.input_dims = q->Text(7);
    e.correlation = q->Int(8);
    if (e.kind == "step") {
      auto [it, fresh] = steps.emplace(std::make_pair(e.trace, e.name), Step{e.trace, e.ts, e.end(), e.name});
      if (!fresh) it->second.start = std::min(it->second.start, e.ts), it->second.end = std::max(it->second.end, e.end());
    }
    p.events.push_back(std::move(e));
  }
  for (auto& [k, s] : steps) p.steps.push_back(s);
  std::sort(p.steps.begin(), p.steps.end(),
            [](const Step& a, const Step& b) { return std::tie(a.trace, a.start) < std::tie(b.trace, b.start); });
  return p;
}

namespace {
// Length of the union of intervals (sorted by start).
int64_t UnionLength(std::vector<std::pair<int64_t, int64_t>> iv) {
  std::sort(iv.begin(), iv.end());
  int64_t total = 0, cur_s = 0, cur_e = -1;
  bool open = false;
  for (auto [s, e] : iv) {
    if (!open || s > cur_e) {
      if (open) total += cur_e - cur_s;
      cur_s = s, cur_e = e, open = true;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (open) total += cur_e - cur_s;
  return total;
}

}  // namespace

bool Profile::IsCommunication(const std::string& name) const {
  // CUDA's and ROCm's collectives may be in any profile; the target adds its own.
  for (const char* generic : {"nccl", "rccl", "AllReduce"})
    if (name.find(generic) != std::string::npos) return true;
  for (const auto& marker : target.profile.communication_kernels)
    if (name.find(marker) != std::string::npos) return true;
  return false;
}

Breakdown ComputeBreakdown(const Profile& p) {
  Breakdown b;
  // Windows: the marked steps, or each trace's whole span.
  std::vector<Profile::Step> windows = p.steps;
  if (windows.empty()) {
    std::map<int64_t, Profile::Step> span;
    for (const auto& e : p.events) {
      auto [it, fresh] = span.emplace(e.trace, Profile::Step{e.trace, e.ts, e.end(), ""});
      if (!fresh) it->second.start = std::min(it->second.start, e.ts), it->second.end = std::max(it->second.end, e.end());
    }
    for (auto& [t, s] : span) windows.push_back(s);
  } else {
    b.steps = windows.size();
  }
  // Correlation ids of the device tasks: a runtime call with one of them launched that task.
  std::set<std::pair<int64_t, int64_t>> launched;
  for (const auto& e : p.events)
    if (p.IsDevice(e) && e.correlation >= 0) launched.insert({e.trace, e.correlation});
  for (const auto& w : windows) {
    b.wall += w.end - w.start;
    std::vector<std::pair<int64_t, int64_t>> compute, comm, copies, busy, host, launch;
    for (const auto& e : p.events) {
      if (e.trace != w.trace || e.end() <= w.start || e.ts >= w.end) continue;
      std::pair<int64_t, int64_t> iv{std::max(e.ts, w.start), std::min(e.end(), w.end)};
      if (p.IsDevice(e)) {
        busy.push_back(iv);
        if (e.kind != "kernel") copies.push_back(iv);
        else if (p.IsCommunication(e.name)) comm.push_back(iv);
        else compute.push_back(iv);
      } else if (e.kind == "cpu_op") {
        host.push_back(iv);
      } else if ((e.kind == "runtime" || e.kind == "driver") && launched.count({e.trace, e.correlation})) {
        launch.push_back(iv);
      }
    }
    b.compute += UnionLength(compute);
    b.communication += UnionLength(comm);
    b.memcpy += UnionLength(copies);
    b.device_busy += UnionLength(busy);
    b.host_ops += UnionLength(host);
    b.launch += UnionLength(launch);
  }
  return b;
}

}  // namespace portkit::prof
