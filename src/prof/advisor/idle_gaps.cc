// Advisor rule: idle_gaps
// What it finds: device idle time inside the profiled steps (wall time not covered by any kernel,
//   memcpy or memset).
// Why it matters: an idle accelerator is waiting for the host (data loading, Python overhead,
//   synchronisation).
// Advice: overlap data loading (num_workers, pin_memory), remove synchronisations, fuse ops.
#include "prof/advisor/rule_list.h"

namespace portkit::prof {
namespace {

class IdleGapsRule : public AdvisorRule {
 public:
  std::string_view name() const override { return "idle_gaps"; }
  void Check(const Profile& p, std::vector<AdvisorFinding>& out) override {
    Breakdown b = ComputeBreakdown(p);
    if (b.device_busy == 0 || b.wall == 0) return;
    int64_t idle = b.wall - b.device_busy;
    double share = static_cast<double>(idle) / static_cast<double>(b.wall);
    if (share < 0.2) return;
    out.push_back({std::string(name()), share > 0.5 ? Severity::kHigh : Severity::kMedium,
                   "the device is idle " + Share(idle, b.wall) + " of the time",
                   Duration(idle) + " idle of " + Duration(b.wall) +
                       (b.steps ? " over " + std::to_string(b.steps) + " steps" : ""),
                   "overlap host work with the device: more DataLoader workers, pin_memory, no host syncs"});
  }
};

}  // namespace

std::unique_ptr<AdvisorRule> MakeIdleGapsRule() { return std::make_unique<IdleGapsRule>(); }

}  // namespace portkit::prof
