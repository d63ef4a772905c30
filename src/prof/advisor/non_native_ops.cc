// Advisor rule: non_native_ops
// What it finds: operators and activations the default target does not run natively (its
//   target.json, profile.non_native_ops: Mish on the NPU), as the op itself (`nn.Mish` and
//   `F.mish` both run as one aten op), its backward, or its decomposed form (x * tanh(softplus(x))).
// Why it matters: the target splits such an op into several units; a natively supported one is
//   a single unit.
// Evidence: calls and exclusive (self) host time, forward and backward, as a share of step time.
// Advice: the target's replacement (LeakyReLU for Mish), with its caveat (check accuracy).
#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "prof/advisor/rule_list.h"

namespace portkit::prof {
namespace {

class NonNativeOpsRule : public AdvisorRule {
 public:
  std::string_view name() const override { return "non_native_ops"; }

  void Check(const Profile& p, std::vector<AdvisorFinding>& out) override {
    if (p.target.profile.non_native_ops.empty()) return;
    auto self = SelfTimes(p);
    int64_t step_time = ComputeBreakdown(p).wall;
    // Per thread, the aten ops in time order (for the decomposed forms).
    struct Seq {
      std::string text;
      std::vector<size_t> starts, events;
    };
    std::map<std::tuple<int64_t, int64_t, int64_t>, Seq> threads;
    for (size_t i = 0; i < p.events.size(); ++i) {
      const ProfEvent& e = p.events[i];
      if (e.kind != "cpu_op" || e.name.rfind("aten::", 0) != 0 || !InSteps(p, e)) continue;
      Seq& s = threads[{e.trace, e.pid, e.tid}];
      if (!s.text.empty()) s.text.push_back('-');
      s.starts.push_back(s.text.size());
      s.text += e.name.substr(6);
      s.events.push_back(i);
    }
    for (const auto& op : p.target.profile.non_native_ops) Check(p, op, self, step_time, threads, out);
  }

 private:
  template <typename Threads>
  void Check(const Profile& p, const target::NonNativeOp& op, const std::vector<int64_t>& self, int64_t step_time,
             const Threads& threads, std::vector<AdvisorFinding>& out) {
    // Profiled name -> (calls, self time), by name.
    std::map<std::string, std::pair<int64_t, int64_t>> per_name;
    std::set<std::string> names(op.ops.begin(), op.ops.end());
    size_t decomposed = 0;
    int64_t decomposed_time = 0;
    if (!op.decomposed.empty()) {
      std::regex re("(^|-)(" + op.decomposed + ")(?=-|$)");
      for (const auto& [key, s] : threads) {
        for (auto it = std::sregex_iterator(s.text.begin(), s.text.end(), re); it != std::sregex_iterator(); ++it) {
          size_t from = static_cast<size_t>(it->position(2)), to = from + static_cast<size_t>(it->length(2));
          ++decomposed;
          auto first = std::lower_bound(s.starts.begin(), s.starts.end(), from) - s.starts.begin();
          for (size_t i = static_cast<size_t>(first); i < s.starts.size() && s.starts[i] < to; ++i)
            decomposed_time += self[s.events[i]];
        }
      }
      if (decomposed > 0) names.insert(op.decomposed_backward.begin(), op.decomposed_backward.end());
    }
    for (size_t i = 0; i < p.events.size(); ++i) {
      const ProfEvent& e = p.events[i];
      if (e.kind != "cpu_op" || !names.count(e.name) || !InSteps(p, e)) continue;
      auto& [calls, time] = per_name[e.name];
      ++calls, time += self[i];
    }
    if (per_name.empty() && decomposed == 0) return;
    int64_t total = decomposed_time;
    std::string evidence;
    for (const auto& [n, ct] : per_name) {
      total += ct.second;
      evidence += (evidence.empty() ? "" : ", ") + n + " " + std::to_string(ct.first) + " calls " + Duration(ct.second);
    }
    if (decomposed > 0)
      evidence += (evidence.empty() ? "" : ", ") + std::string("decomposed form ") + op.decomposed + " " +
                  std::to_string(decomposed) + " times " + Duration(decomposed_time);
    evidence += "; exclusive (self) time, forward and backward: " + Duration(total) + " of " + Duration(step_time) +
                " step time (" + Share(total, step_time) + ")";
    if (!op.why.empty()) evidence += "; " + op.name + " is " + op.why;
    double share = step_time ? static_cast<double>(total) / static_cast<double>(step_time) : 0;
    Severity sev = share > 0.05 ? Severity::kHigh : share > 0.01 ? Severity::kMedium : Severity::kLow;
    std::string advice =
        "replace " + op.name + (op.modules.empty() ? "" : " (" + op.modules + ")") + " with " + op.replacement;
    if (!op.caveat.empty()) advice += "; " + op.caveat;
    out.push_back({std::string(name()), sev,
                   op.name + " does not run natively on the target: " + Share(total, step_time) + " of step time",
                   evidence, advice});
  }
};

}  // namespace

std::unique_ptr<AdvisorRule> MakeNonNativeOpsRule() { return std::make_unique<NonNativeOpsRule>(); }

}  // namespace portkit::prof
