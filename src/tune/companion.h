#pragma once
/// Running the Python companion for the engines that live in it (SGAT: portkit.tune, GDAT:
/// portkit.gdat): the interpreter, PYTHONPATH, and how its end reads.
#include <string>
#include <vector>

#include "core/status.h"
#include "tune/api.h"

namespace portkit::tune {

/// The interpreter: `given`, else $PORTKIT_PYTHON, else python3.
std::string CompanionInterpreter(const std::string& given);

/// Runs `argv` (argv[0] is the interpreter) with the companion's folder first on PYTHONPATH (as
/// `prof collect` does; none found: the interpreter's own, pip-installed portkit) and this
/// process's stdout and stderr. The result's `end` is set; `failure` is `describe` followed by
/// how the child ended, for an end other than kOk and kRefused. Errors: Spawn's, when the
/// interpreter cannot be started.
Expected<CompanionRun> RunCompanion(std::vector<std::string> argv, const std::string& describe);

}  // namespace portkit::tune
