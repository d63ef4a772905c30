#pragma once
/// `portkit tune --job-type=4`: GDAT, gradient (DDP communication) tuning. The engine lives in
/// the Python companion (python/portkit/gdat), since it must run inside the training processes;
/// this layer checks every option and path, then runs `python -m portkit.gdat simulate|train`.
#include "core/context.h"

namespace portkit::cli {

/// True when argv asks for job type 4 (`--job-type=4`, `--job-type 4`, `--job_type=4`, ...).
bool WantsGdat(int argc, char** argv);

/// argv[0] is "portkit tune"; returns the exit code (cli_common.h).
int TuneGdatCommand(int argc, char** argv, Context& ctx);

}  // namespace portkit::cli
