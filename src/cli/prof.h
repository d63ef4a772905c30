#pragma once
/// `portkit prof`: the command line of the profiling engine (src/prof/api.h).
#include "core/context.h"

namespace portkit::cli {

/// collect | import | export summary | export timeline | analyse | diff.
int ProfCommand(int argc, char** argv, Context& ctx);

}  // namespace portkit::cli
