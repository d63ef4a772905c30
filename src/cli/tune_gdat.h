#pragma once
/// `portkit tune --job-type=4`: GDAT, gradient (DDP communication) tuning. argv → GdatOptions,
/// every option and path checked before any work, tune::RunGdat (src/tune/api.h, which runs the
/// Python companion), then the exit code.
#include "core/context.h"

namespace portkit::cli {

/// True when argv asks for job type 4 (`--job-type=4`, `--job-type 4`, `--job_type=4`, ...).
bool WantsGdat(int argc, char** argv);

/// argv[0] is "portkit tune"; returns the exit code (cli_common.h).
int TuneGdatCommand(int argc, char** argv, Context& ctx);

}  // namespace portkit::cli
