#pragma once
/// `portkit analyse`: argv → AnalyseOptions, checks before any work, RunAnalyse, the report
/// files and the summary table, the findings gate (--fail-on).
#include "core/context.h"

namespace portkit::cli {

/// argv[0] is "portkit analyse"; returns the exit code (cli_common.h).
int AnalyseCommand(int argc, char** argv, Context& ctx);

}  // namespace portkit::cli
