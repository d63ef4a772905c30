#include "cli/commands.h"

#include "analyse/analyse_command.h"

namespace portkit::cli {

const Command kCommands[] = {
    {"analyse", "migration analysis of PyTorch code: unsupported APIs, CUDA-only code, custom CUDA ops, advice",
     &analyse::AnalyseMain},
};
const size_t kCommandCount = sizeof(kCommands) / sizeof(kCommands[0]);

}  // namespace portkit::cli
