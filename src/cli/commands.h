#pragma once
/// The table of subcommands: adding a command is one entry here.
#include <string_view>

#include "core/context.h"

namespace portkit::cli {

struct Command {
  std::string_view name;
  std::string_view help;
  /// argv[0] is "portkit <name>"; returns the exit code.
  int (*run)(int argc, char** argv, Context& ctx);
};

extern const Command kCommands[];
extern const size_t kCommandCount;

}  // namespace portkit::cli
