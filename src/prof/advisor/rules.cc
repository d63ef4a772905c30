#include "prof/advisor/advisor.h"
#include "prof/advisor/rule_list.h"

namespace portkit::prof {

std::vector<std::unique_ptr<AdvisorRule>> MakeAdvisorRules() {
  std::vector<std::unique_ptr<AdvisorRule>> rules;
  rules.push_back(MakeNonNativeOpsRule());
  rules.push_back(MakeFusionPatternRule());
  rules.push_back(MakeShortTasksRule());
  rules.push_back(MakeIdleGapsRule());
  rules.push_back(MakeSynchronisationRule());
  rules.push_back(MakeDynamicShapesRule());
  rules.push_back(MakeDataLoadingRule());
  return rules;
}

}  // namespace portkit::prof
