// Rule: third_party_api
// What it finds: calls of library APIs that an earlier `analyse -m third_party` run on that library
//   found affected (given with -api/--api-files full_unsupported_results.csv).
// Why it matters: the library function reaches an unsupported API, a custom CUDA op or an unknown
//   API on the target, so the user's call fails there too even though it names no torch API.
// Example: `mmcv.ops.nms(boxes, scores, 0.5)` with mmcv's results → unsupported, with the
//   library's evidence (where inside mmcv, and which API) in Tips.
// Use instead: port or replace the library function first.
#include "analyse/rules/torch_apis/rules.h"
#include "analyse/third_party.h"

namespace portkit::analyse {
namespace {

class ThirdPartyApiRule : public Rule {
 public:
  std::string_view name() const override { return "third_party_api"; }

  void OnCall(const CallEvent& ev, RuleContext& ctx) override {
    const ThirdPartyApis* apis = ctx.data.third_party;
    if (!apis) return;
    for (const auto& q : ev.lookup) {
      if (const std::string* evidence = apis->Evidence(q)) {
        ctx.Report(ev.node, q, "Unsupported third-party API (from -api results): " + *evidence, Category::kUnsupported,
                   Confidence::kHigh, name());
        return;
      }
    }
  }
};

}  // namespace

std::unique_ptr<Rule> MakeThirdPartyApiRule() { return std::make_unique<ThirdPartyApiRule>(); }

}  // namespace portkit::analyse
