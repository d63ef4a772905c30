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

Expected<Profile> Profile::Load(Store& store, const DataDirs& data, const std::string& target) {
  Profile p;
  p.data_dir = data.primary();
  // A named target is looked for in every data folder, as `--target` checked it; the default is
  // the primary folder's (a whole data folder in $PORTKIT_DATA_DIR brings its own default).
  auto facts = target.empty() ? target::LoadTarget(p.data_dir, "") : target::LoadTarget(data, target);
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
      if (!fresh)
        it->second.start = std::min(it->second.start, e.ts), it->second.end = std::max(it->second.end, e.end());
    }
    p.events.push_back(std::move(e));
  }
  std::set<int64_t> stepped;  // traces with a step other than ProfilerStep#0
  for (auto& [k, s] : steps)
    if (s.name != "ProfilerStep#0") stepped.insert(k.first);
  for (auto& [k, s] : steps) {
    if (s.name == "ProfilerStep#0" && stepped.count(k.first)) p.warmup.push_back(s);
    else p.steps.push_back(s);
  }
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
      if (!fresh)
        it->second.start = std::min(it->second.start, e.ts), it->second.end = std::max(it->second.end, e.end());
    }
    for (auto& [t, s] : span) windows.push_back(s);
  } else {
    b.steps = windows.size();
  }
  b.warmup_steps = p.warmup.size();
  for (const auto& w : p.warmup) b.warmup += w.end - w.start;
  // Correlation ids of the device tasks: a runtime call with one of them launched that task.
  std::set<std::pair<int64_t, int64_t>> launched;
  for (const auto& e : p.events)
    if (p.IsDevice(e) && e.correlation >= 0) launched.insert({e.trace, e.correlation});
  // Each event goes to the windows it overlaps: per trace, windows sorted by start; when their ends
  // are sorted too (steps do not overlap: the usual case) a binary search finds the first window
  // an event can touch, so the cost is events × log(windows), not events × windows.
  struct Buckets {
    std::vector<std::pair<int64_t, int64_t>> compute, comm, copies, busy, host, launch;
  };
  std::vector<Buckets> buckets(windows.size());
  std::map<int64_t, std::vector<size_t>> by_trace;
  for (size_t i = 0; i < windows.size(); ++i) by_trace[windows[i].trace].push_back(i);
  std::map<int64_t, bool> sorted_ends;
  for (auto& [trace, idx] : by_trace) {
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t c) {
      return windows[a].start != windows[c].start ? windows[a].start < windows[c].start : a < c;
    });
    bool monotone = true;
    for (size_t k = 1; k < idx.size(); ++k) monotone &= windows[idx[k - 1]].end <= windows[idx[k]].end;
    sorted_ends[trace] = monotone;
  }
  auto add = [&](const ProfEvent& e, size_t wi) {
    const auto& w = windows[wi];
    if (e.end() <= w.start || e.ts >= w.end) return;
    std::pair<int64_t, int64_t> iv{std::max(e.ts, w.start), std::min(e.end(), w.end)};
    Buckets& bk = buckets[wi];
    if (p.IsDevice(e)) {
      bk.busy.push_back(iv);
      if (e.kind != "kernel") bk.copies.push_back(iv);
      else if (p.IsCommunication(e.name)) bk.comm.push_back(iv);
      else bk.compute.push_back(iv);
    } else if (e.kind == "cpu_op") {
      bk.host.push_back(iv);
    } else if ((e.kind == "runtime" || e.kind == "driver") && launched.count({e.trace, e.correlation})) {
      bk.launch.push_back(iv);
    }
  };
  for (const auto& e : p.events) {
    auto it = by_trace.find(e.trace);
    if (it == by_trace.end()) continue;
    const std::vector<size_t>& idx = it->second;
    if (!sorted_ends[e.trace]) {
      for (size_t wi : idx) add(e, wi);
      continue;
    }
    // First window whose end is after the event's start; then on while windows start before its end.
    auto first =
        std::upper_bound(idx.begin(), idx.end(), e.ts, [&](int64_t ts, size_t wi) { return ts < windows[wi].end; });
    for (auto k = first; k != idx.end() && windows[*k].start < e.end(); ++k) add(e, *k);
  }
  for (size_t wi = 0; wi < windows.size(); ++wi) {
    b.wall += windows[wi].end - windows[wi].start;
    b.compute += UnionLength(buckets[wi].compute);
    b.communication += UnionLength(buckets[wi].comm);
    b.memcpy += UnionLength(buckets[wi].copies);
    b.device_busy += UnionLength(buckets[wi].busy);
    b.host_ops += UnionLength(buckets[wi].host);
    b.launch += UnionLength(buckets[wi].launch);
  }
  return b;
}

}  // namespace portkit::prof
