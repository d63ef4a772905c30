// Advisor rule: short_tasks
// What it finds: many very short device tasks (< 10 us) — a launch-bound program where the host
//   cannot feed the device; on CPU-only profiles, many very short leaf operators.
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
    size_t device = 0, short_device = 0, ops = 0, short_ops = 0;
    int64_t short_time = 0;
    for (const auto& e : p.events) {
      if (p.IsDevice(e)) {
        ++device;
        if (e.dur < kShortNs) ++short_device, short_time += e.dur;
      } else if (e.kind == "cpu_op") {
        ++ops;
        short_ops += e.dur < kShortNs;
      }
    }
    if (device > 0) {
      double share = static_cast<double>(short_device) / static_cast<double>(device);
      if (share < 0.3) return;
      out.push_back({std::string(name()), share > 0.6 ? Severity::kHigh : Severity::kMedium,
                     "launch-bound: " + Share(static_cast<int64_t>(short_device), static_cast<int64_t>(device)) +
                         " of device tasks are shorter than 10 us",
                     std::to_string(short_device) + " of " + std::to_string(device) + " tasks, " +
                         Duration(short_time) + " in all",
                     "fuse small operators, grow the batch, or capture the step as a graph"});
    } else if (ops > 0) {
      double share = static_cast<double>(short_ops) / static_cast<double>(ops);
      if (share < 0.5) return;
      out.push_back({std::string(name()), Severity::kLow,
                     Share(static_cast<int64_t>(short_ops), static_cast<int64_t>(ops)) +
                         " of operators take less than 10 us",
                     std::to_string(short_ops) + " of " + std::to_string(ops) + " CPU operators",
                     "on an accelerator these become launch-bound: fuse them or grow the batch"});
    }
  }
};

}  // namespace

std::unique_ptr<AdvisorRule> MakeShortTasksRule() { return std::make_unique<ShortTasksRule>(); }

}  // namespace portkit::prof
