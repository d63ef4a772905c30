// Advisor rule: dynamic_shapes
// What it finds: call sites whose input shapes change from step to step (needs --record-shapes and
//   two or more marked steps). A call site is an operator at one position of its thread's operator
//   sequence within a step: the k-th call of aten::linear on the main thread, in steps that call it
//   the same number of times. The same operator called with different shapes at different places of
//   one step (the layers of a static ResNet) is not dynamic: its shapes repeat every step.
// Why it matters: accelerators that compile per shape (Ascend) compile again whenever a shape
//   changes; a static network compiles once.
// Example: a model fed sequences of varying length: aten::linear at the same place sees
//   [[4, 17, 64]] in one step and [[4, 23, 64]] in the next.
// Advice: pad or bucket to fixed shapes; `portkit analyse -m dynamic_shape` finds the call sites.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "prof/advisor/rule_list.h"

namespace portkit::prof {
namespace {

class DynamicShapesRule : public AdvisorRule {
 public:
  std::string_view name() const override { return "dynamic_shapes"; }
  void Check(const Profile& p, std::vector<AdvisorFinding>& out) override {
    // Steps of each trace, by start.
    std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> steps;
    for (const auto& s : p.steps) steps[s.trace].emplace_back(s.start, s.end);
    for (auto& [trace, list] : steps) std::sort(list.begin(), list.end());
    auto step_of = [&](const ProfEvent& e) -> int64_t {
      auto it = steps.find(e.trace);
      if (it == steps.end()) return -1;
      const auto& list = it->second;
      auto at = std::upper_bound(list.begin(), list.end(), std::make_pair(e.ts, INT64_MAX));
      if (at == list.begin()) return -1;
      --at;
      return e.ts < at->second ? at - list.begin() : -1;
    };
    // Per (trace, pid, tid, op, step): the shapes of its calls in order.
    using Thread = std::tuple<int64_t, int64_t, int64_t, std::string>;
    std::map<Thread, std::map<int64_t, std::vector<const std::string*>>> calls;
    for (const auto& e : p.events) {
      if (e.kind != "cpu_op" || e.input_dims.empty() || e.input_dims == "[]") continue;
      int64_t step = step_of(e);
      if (step >= 0) calls[{e.trace, e.pid, e.tid, e.name}][step].push_back(&e.input_dims);
    }
    // A call site: (thread and op, calls per step, position); its shapes over the steps.
    struct Site {
      std::set<std::string> shapes;
      size_t steps = 0;
    };
    std::map<std::string, std::pair<size_t, size_t>> dynamic_ops;  // op → (sites, most shapes)
    size_t dynamic_sites = 0;
    for (const auto& [thread, by_step] : calls) {
      std::map<std::pair<size_t, size_t>, Site> sites;
      for (const auto& [step, shapes] : by_step)
        for (size_t k = 0; k < shapes.size(); ++k) {
          Site& site = sites[{shapes.size(), k}];
          site.shapes.insert(*shapes[k]);
          ++site.steps;
        }
      for (const auto& [key, site] : sites) {
        if (site.steps < 2 || site.shapes.size() < 2) continue;
        ++dynamic_sites;
        auto& [count, most] = dynamic_ops[std::get<3>(thread)];
        ++count;
        most = std::max(most, site.shapes.size());
      }
    }
    if (dynamic_sites == 0) return;
    std::vector<std::tuple<size_t, size_t, std::string>> ranked;
    for (const auto& [op, cm] : dynamic_ops) ranked.emplace_back(cm.first, cm.second, op);
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
      return std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(a)) <
             std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(b));
    });
    std::string evidence;
    for (size_t i = 0; i < ranked.size() && i < 5; ++i)
      evidence += (i ? ", " : "") + std::get<2>(ranked[i]) + " (" + std::to_string(std::get<0>(ranked[i])) +
                  " call site(s), up to " + std::to_string(std::get<1>(ranked[i])) + " shapes)";
    evidence += "; a call site is an operator at one place of its thread's operator sequence, compared over " +
                std::to_string(p.steps.size()) + " steps";
    out.push_back({std::string(name()), Severity::kMedium,
                   std::to_string(dynamic_sites) + " call site(s) of " + std::to_string(dynamic_ops.size()) +
                       " operator(s) see different input shapes from step to step",
                   evidence,
                   "pad or bucket inputs to a few fixed shapes; run `portkit analyse -m dynamic_shape` to find "
                   "the call sites"});
  }
};

}  // namespace

std::unique_ptr<AdvisorRule> MakeDynamicShapesRule() { return std::make_unique<DynamicShapesRule>(); }

}  // namespace portkit::prof
