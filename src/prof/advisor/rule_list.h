#pragma once
/// The advisor's rules, one file each; registered in rules.cc.
#include <memory>

#include "prof/advisor/advisor.h"

namespace portkit::prof {

std::unique_ptr<AdvisorRule> MakeFusionPatternRule();
std::unique_ptr<AdvisorRule> MakeShortTasksRule();
std::unique_ptr<AdvisorRule> MakeIdleGapsRule();
std::unique_ptr<AdvisorRule> MakeSynchronisationRule();
std::unique_ptr<AdvisorRule> MakeDynamicShapesRule();
std::unique_ptr<AdvisorRule> MakeDataLoadingRule();

/// "12.3 ms" / "45.6 us".
std::string Duration(int64_t ns);
/// "12.3%".
std::string Share(int64_t part, int64_t whole);

}  // namespace portkit::prof
