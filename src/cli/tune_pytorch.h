#pragma once
/// `portkit tune --framework=pytorch`: SGAT for a PyTorch model. argv → SgatOptions, every option
/// and path checked before any work, tune::RunSgat (src/tune/api.h, which runs the Python
/// companion), then the exit code.
#include <string_view>

#include "core/context.h"

namespace portkit::cli {

/// True when argv selects the PyTorch front end (--framework=pytorch or --framework pytorch).
bool WantsPytorchFramework(int argc, char** argv);

/// argv[0] is "portkit tune"; returns the exit code (cli_common.h): the companion's 2 (bad model
/// or input) is kExitUsage, any other failure kExitFailure.
int TunePytorchCommand(int argc, char** argv, Context& ctx);

}  // namespace portkit::cli
