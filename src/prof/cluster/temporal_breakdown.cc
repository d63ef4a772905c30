// HTA's temporal breakdown of a rank's device timeline: idle time (the window less the union of
// every device task), compute time (the union of computation kernels), non-compute time (busy,
// not computing), plus the union of communication and memory tasks, and the communication time
// during which computation also ran (overlap; HTA's comp_comm_overlap_ratio is overlapped /
// communication).
#include <algorithm>

#include "prof/cluster/cluster.h"

namespace portkit::prof::cluster {
namespace {

using Intervals = std::vector<std::pair<int64_t, int64_t>>;

/// Sorts and merges in place; returns the total length.
int64_t Merge(Intervals& v) {
  std::sort(v.begin(), v.end());
  size_t out = 0;
  int64_t total = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (out > 0 && v[i].first <= v[out - 1].second) {
      v[out - 1].second = std::max(v[out - 1].second, v[i].second);
    } else {
      v[out++] = v[i];
    }
  }
  v.resize(out);
  for (const auto& iv : v) total += iv.second - iv.first;
  return total;
}

/// Length of the intersection of two merged lists.
int64_t Intersection(const Intervals& a, const Intervals& b) {
  int64_t total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) total += hi - lo;
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return total;
}

TimeSplit Split(const std::vector<const DeviceTask*>& tasks, int64_t from, int64_t to) {
  TimeSplit s;
  s.window = std::max<int64_t>(0, to - from);
  Intervals all, compute, comm, memory, receive;
  for (const DeviceTask* t : tasks) {
    int64_t a = std::max(t->start, from), b = std::min(t->end, to);
    if (b <= a) continue;
    all.emplace_back(a, b);
    if (t->cls == TaskClass::kCompute) compute.emplace_back(a, b);
    else if (t->cls == TaskClass::kCommunication) comm.emplace_back(a, b);
    if (t->receive) receive.emplace_back(a, b);
    else if (t->cls == TaskClass::kMemory) memory.emplace_back(a, b);
  }
  s.busy = Merge(all);
  s.compute = Merge(compute);
  s.communication = Merge(comm);
  s.memory = Merge(memory);
  s.overlapped = Intersection(compute, comm);
  s.receive = Merge(receive);
  s.receive_exposed = s.receive - Intersection(compute, receive);
  return s;
}

}  // namespace

TimeSplit SplitWindow(const std::vector<DeviceTask>& tasks, int64_t from, int64_t to) {
  std::vector<const DeviceTask*> ptrs;
  ptrs.reserve(tasks.size());
  for (const auto& t : tasks) ptrs.push_back(&t);
  return Split(ptrs, from, to);
}

RankBreakdown ComputeRankBreakdown(const RankTrace& trace) {
  RankBreakdown out;
  out.rank = trace.rank;
  if (trace.tasks.empty()) return out;
  int64_t first = trace.tasks.front().start, last = first;
  for (const auto& t : trace.tasks) last = std::max(last, t.end);
  out.total = SplitWindow(trace.tasks, first, last);

  // Per step: the tasks launched in the step; the window runs from the step's first task to its
  // last task's end or the next step's first task, whichever is later (the gap before the next
  // step is this step's idle time).
  std::vector<std::vector<const DeviceTask*>> by_step(trace.steps.size());
  for (const auto& t : trace.tasks)
    if (t.step >= 0) by_step[static_cast<size_t>(t.step)].push_back(&t);
  std::vector<size_t> present;
  for (size_t s = 0; s < by_step.size(); ++s)
    if (!by_step[s].empty()) present.push_back(s);
  for (size_t k = 0; k < present.size(); ++k) {
    const auto& tasks = by_step[present[k]];
    int64_t start = tasks.front()->start, end = start;
    for (const DeviceTask* t : tasks) start = std::min(start, t->start), end = std::max(end, t->end);
    if (k + 1 < present.size()) {
      int64_t next = by_step[present[k + 1]].front()->start;
      for (const DeviceTask* t : by_step[present[k + 1]]) next = std::min(next, t->start);
      end = std::max(end, next);
    }
    StepSplit ss;
    ss.step = trace.steps[present[k]].number;
    ss.start = start;
    ss.end = end;
    ss.split = Split(tasks, start, end);
    ss.preparing = std::max<int64_t>(0, start - trace.steps[present[k]].cpu_start);
    out.steps.push_back(ss);
  }
  return out;
}

}  // namespace portkit::prof::cluster
