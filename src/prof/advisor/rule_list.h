#pragma once
/// The advisor's rules, one file each; registered in rules.cc.
#include <memory>

#include "prof/advisor/advisor.h"

namespace portkit::prof {

std::unique_ptr<AdvisorRule> MakeNonNativeOpsRule();
std::unique_ptr<AdvisorRule> MakeFusionPatternRule();
std::unique_ptr<AdvisorRule> MakeShortTasksRule();
std::unique_ptr<AdvisorRule> MakeIdleGapsRule();
std::unique_ptr<AdvisorRule> MakeSynchronisationRule();
std::unique_ptr<AdvisorRule> MakeDynamicShapesRule();
std::unique_ptr<AdvisorRule> MakeDataLoadingRule();

}  // namespace portkit::prof
