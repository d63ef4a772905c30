// Advisor rule: data_loading
// What it finds: the share of the profiled time spent fetching batches (the profiler's
//   `enumerate(DataLoader)#...__next__` ranges).
// Why it matters: while the main process loads data, the device waits.
// Advice: DataLoader(num_workers > 0, pin_memory=True, persistent_workers=True), prefetching.
#include "prof/advisor/rule_list.h"

namespace portkit::prof {
namespace {

class DataLoadingRule : public AdvisorRule {
 public:
  std::string_view name() const override { return "data_loading"; }
  void Check(const Profile& p, std::vector<AdvisorFinding>& out) override {
    int64_t time = 0;
    size_t count = 0;
    for (const auto& e : p.events)
      if (e.name.find("DataLoader") != std::string::npos && e.name.find("__next__") != std::string::npos)
        time += e.dur, ++count;
    int64_t wall = ComputeBreakdown(p).wall;
    if (count == 0 || wall == 0) return;
    double share = static_cast<double>(time) / static_cast<double>(wall);
    if (share < 0.05) return;
    out.push_back({std::string(name()), share > 0.2 ? Severity::kHigh : Severity::kMedium,
                   "data loading takes " + Share(time, wall) + " of the profiled time",
                   std::to_string(count) + " batches fetched in " + Duration(time),
                   "DataLoader(num_workers>0, pin_memory=True, persistent_workers=True) and prefetching"});
  }
};

}  // namespace

std::unique_ptr<AdvisorRule> MakeDataLoadingRule() { return std::make_unique<DataLoadingRule>(); }

}  // namespace portkit::prof
