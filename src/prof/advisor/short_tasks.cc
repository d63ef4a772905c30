// Advisor rule: short_tasks
// What it finds: a launch-bound program, judged by time: the host spends at least as long in the
//   runtime/driver calls that launched device tasks (linked by correlation id) as the device is
//   busy, while the device is idle for much of the step; the share of very short device tasks
//   (< 10 us) is supporting evidence. On CPU-only profiles: the share of host operator self time
//   spent in very short operators.
// Why it matters: per-launch overhead (a few us) then dominates the useful work.
// Advice: fuse operators (see fusion_patterns), use larger batches, capture graphs (CUDA/NPU graphs).
#include "prof/advisor/rule_list.h"

namespace portkit::prof {
namespace {

constexpr int64_t kShortNs = 10'000;

class ShortTasksRule : public AdvisorRule {
 public:
  std::string_view name() const override { return "short_tasks"; }
  void Check(const Profile& p, std::vector<AdvisorFinding>& out) override {
    size_t device = 0, short_device = 0;
    int64_t short_time = 0;
    for (const auto& e : p.events) {
      if (!p.IsDevice(e)) continue;
      ++device;
      if (e.dur < kShortNs) ++short_device, short_time += e.dur;
    }
    if (device > 0) {
      Breakdown b = ComputeBreakdown(p);
      if (b.wall <= 0) return;
      double busy = static_cast<double>(b.device_busy) / static_cast<double>(b.wall);
      // Launch-bound: the device waits (busy < 70 %), and the host's launch calls take at least
      // as long as the device's work and a tenth of the step.
      if (busy >= 0.7 || b.launch < b.device_busy || 10 * b.launch < b.wall) return;
      out.push_back({std::string(name()), busy < 0.3 ? Severity::kHigh : Severity::kMedium,
                     "launch-bound: launch calls take " + Share(b.launch, b.wall) +
                         " of step time while the device is busy " + Share(b.device_busy, b.wall),
                     "runtime/driver calls that launched device tasks " + Duration(b.launch) + ", device busy " +
                         Duration(b.device_busy) + " of " + Duration(b.wall) + "; " + std::to_string(short_device) +
                         " of " + std::to_string(device) + " device tasks are shorter than 10 us (" +
                         Duration(short_time) + " in all)",
                     "fuse small operators, grow the batch, or capture the step as a graph"});
      return;
    }
    // CPU only: the self time of short operators.
    auto self = SelfTimes(p);
    int64_t all = 0, short_self = 0;
    size_t ops = 0, short_ops = 0;
    for (size_t i = 0; i < p.events.size(); ++i) {
      const ProfEvent& e = p.events[i];
      if (e.kind != "cpu_op") continue;
      ++ops, all += self[i];
      if (e.dur < kShortNs) ++short_ops, short_self += self[i];
    }
    if (all <= 0 || static_cast<double>(short_self) < 0.3 * static_cast<double>(all)) return;
    out.push_back({std::string(name()), Severity::kLow,
                   Share(short_self, all) + " of host operator time is in operators shorter than 10 us",
                   std::to_string(short_ops) + " of " + std::to_string(ops) + " CPU operators, " +
                       Duration(short_self) + " of " + Duration(all) + " self time",
                   "on an accelerator these become launch-bound: fuse them or grow the batch"});
  }
};

}  // namespace

std::unique_ptr<AdvisorRule> MakeShortTasksRule() { return std::make_unique<ShortTasksRule>(); }

}  // namespace portkit::prof
