#pragma once
/// `portkit migrate`: argv → MigrateOptions, checks before any work, RunMigrate, the change list
/// (CSV and/or JSON) and the summary table.
#include "core/context.h"

namespace portkit::cli {

/// argv[0] is "portkit migrate"; returns the exit code (cli_common.h).
int MigrateCommand(int argc, char** argv, Context& ctx);

}  // namespace portkit::cli
