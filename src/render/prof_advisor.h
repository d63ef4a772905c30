#pragma once
/// Renderers of the advisor's report (`prof analyse`): text (also printed), a self-contained
/// HTML page with inline SVG charts, and JSON.
#include <string>

#include "prof/api.h"

namespace portkit::render {

std::string ProfAdvisorText(const prof::AnalyseReport& report);
std::string ProfAdvisorHtml(const prof::AnalyseReport& report);
/// `{"profiled_ns", "steps", "time_split": [{what, ns, share}], "top_operators": [{name, ns}],
/// "top_device_tasks": [...], "findings": [{rule, severity, title, evidence, advice}]}`.
std::string ProfAdvisorJson(const prof::AnalyseReport& report);

}  // namespace portkit::render
