// Advisor rule: synchronisation
// What it finds: host-device synchronisations — cudaDeviceSynchronize / StreamSynchronize /
//   EventSynchronize, sync events, and aten::item / aten::_local_scalar_dense (a tensor read on the
//   host, e.g. `loss.item()` every step).
// Why it matters: the host stops until the device drains its queue; the device then idles.
// Advice: read scalars every N steps, avoid .item()/.cpu() in the loop, drop explicit syncs.
#include "prof/advisor/rule_list.h"

namespace portkit::prof {
namespace {

class SynchronisationRule : public AdvisorRule {
 public:
  std::string_view name() const override { return "synchronisation"; }
  void Check(const Profile& p, std::vector<AdvisorFinding>& out) override {
    size_t count = 0;
    int64_t time = 0, wall = ComputeBreakdown(p).wall;
    for (const auto& e : p.events) {
      bool sync = e.kind == "sync" || e.name.find("Synchronize") != std::string::npos || e.name == "aten::item" ||
                  e.name == "aten::_local_scalar_dense";
      if (sync && e.name != "aten::_local_scalar_dense") ++count, time += e.dur;  // item contains it
    }
    if (count == 0) return;
    double share = wall ? static_cast<double>(time) / static_cast<double>(wall) : 0;
    out.push_back({std::string(name()),
                   share > 0.1    ? Severity::kHigh
                   : share > 0.02 ? Severity::kMedium
                                  : Severity::kLow,
                   std::to_string(count) + " host-device synchronisations",
                   Duration(time) + " spent waiting (" + Share(time, wall) + " of the profiled time)",
                   "avoid .item()/.cpu()/explicit synchronize inside the step; log scalars every N steps"});
  }
};

}  // namespace

std::unique_ptr<AdvisorRule> MakeSynchronisationRule() { return std::make_unique<SynchronisationRule>(); }

}  // namespace portkit::prof
