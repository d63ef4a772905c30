#pragma once
/// `portkit tune` and `portkit tune bank`: argv and environment → TuneOptions, every check before
/// any work or file, RunTune / RunBank*, then the renderers (src/render/tune_render.h).
#include "core/context.h"

namespace portkit::cli {

/// argv[0] is "portkit tune"; returns the exit code (cli_common.h).
int TuneCommand(int argc, char** argv, Context& ctx);

}  // namespace portkit::cli
