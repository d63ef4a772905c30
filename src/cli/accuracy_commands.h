#pragma once
/// The accuracy commands: argv → options → accuracy engine (accuracy/api.h) → renderers → exit
/// code (cli_common.h).
#include "core/context.h"

namespace portkit::cli {

int CompareCommand(int argc, char** argv, Context& ctx);
int OverflowCommand(int argc, char** argv, Context& ctx);
int ConvertCommand(int argc, char** argv, Context& ctx);
int ExtractCommand(int argc, char** argv, Context& ctx);

}  // namespace portkit::cli
