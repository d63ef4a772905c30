#pragma once
/// `portkit tune --framework=pytorch`: SGAT for a PyTorch model, run by the Python companion
/// (python -m portkit.tune); this layer checks the arguments and spawns it.
#include <string_view>

#include "core/context.h"

namespace portkit::cli {

/// True when argv selects the PyTorch front end (--framework=pytorch or --framework pytorch).
bool WantsPytorchFramework(int argc, char** argv);

/// argv[0] is "portkit tune"; returns the exit code (cli_common.h): the companion's 2 (bad model
/// or input) is kExitUsage, any other failure kExitFailure.
int TunePytorchCommand(int argc, char** argv, Context& ctx);

}  // namespace portkit::cli
