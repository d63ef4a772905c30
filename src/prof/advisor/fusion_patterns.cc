// Advisor rule: fusion_patterns
// What it finds: operator sequences a fused kernel replaces — the sequences of msprof-analyze's
//   timeline_fusion_ops.yaml (RMSNorm, rotary, SwiGLU, GeGLU, attention, ...), matched as regexes over each thread's
//   aten ops in time order (data/advisor/fusion_patterns.tsv).
// Why it matters: each op is a kernel launch and a round trip of the tensor through memory.
// Advice: the target's fused API (target.json profile.fusion_apis), else the data file's.
#include <map>
#include <regex>

#include "core/tsv.h"
#include "prof/advisor/rule_list.h"

namespace portkit::prof {
namespace {

class FusionPatternRule : public AdvisorRule {
 public:
  std::string_view name() const override { return "fusion_patterns"; }

  // The target's fused API for pattern `name`, else the table's target-neutral advice.
  static const std::string& Replacement(const Profile& p, const std::string& name, const std::string& generic) {
    auto it = p.target.profile.fusion_apis.find(name);
    return it == p.target.profile.fusion_apis.end() ? generic : it->second;
  }

  void Check(const Profile& p, std::vector<AdvisorFinding>& out) override {
    auto rows = ReadTsvRows(p.data_dir / "advisor" / "fusion_patterns.tsv");
    if (!rows.ok()) {
      out.push_back({std::string(name()), Severity::kInfo, "fusion patterns not checked", rows.status().message(), ""});
      return;
    }
    // Per thread: the aten op names joined by '-', with where each name starts.
    struct Seq {
      std::string text;
      std::vector<size_t> starts;
      std::vector<const ProfEvent*> events;
    };
    std::map<std::tuple<int64_t, int64_t, int64_t>, Seq> threads;
    int64_t host_total = 0;
    for (const auto& e : p.events) {
      if (e.kind != "cpu_op" || e.name.rfind("aten::", 0) != 0) continue;
      host_total += e.dur;
      Seq& s = threads[{e.trace, e.pid, e.tid}];
      if (!s.text.empty()) s.text.push_back('-');
      s.starts.push_back(s.text.size());
      s.text += e.name.substr(6);
      s.events.push_back(&e);
    }
    for (const auto& r : *rows) {
      if (r.size() < 3) continue;
      std::regex re("(^|-)(" + r[1] + ")(?=-|$)");
      size_t count = 0;
      int64_t time = 0;
      for (const auto& [key, s] : threads) {
        for (auto it = std::sregex_iterator(s.text.begin(), s.text.end(), re); it != std::sregex_iterator(); ++it) {
          size_t from = static_cast<size_t>(it->position(2)), to = from + static_cast<size_t>(it->length(2));
          ++count;
          auto first = std::lower_bound(s.starts.begin(), s.starts.end(), from) - s.starts.begin();
          for (size_t i = static_cast<size_t>(first); i < s.starts.size() && s.starts[i] < to; ++i)
            time += s.events[i]->dur;
        }
      }
      if (count == 0) continue;
      double share = host_total ? static_cast<double>(time) / static_cast<double>(host_total) : 0;
      Severity sev = share > 0.05 ? Severity::kHigh : share > 0.01 ? Severity::kMedium : Severity::kLow;
      out.push_back({std::string(name()), sev, r[0] + ": " + std::to_string(count) + " occurrences",
                     "the sequence " + r[1] + " ran " + std::to_string(count) + " times, " + Duration(time) +
                         " of host op time (" + Share(time, host_total) + ")",
                     "replace it with " + Replacement(p, r[0], r[2])});
    }
  }
};

}  // namespace

std::unique_ptr<AdvisorRule> MakeFusionPatternRule() { return std::make_unique<FusionPatternRule>(); }

}  // namespace portkit::prof
