#include "cli/commands.h"

#include "analyse/analyse_command.h"
#include "analyse/migrate.h"

namespace portkit::cli {

const Command kCommands[] = {
    {"analyse", "migration analysis of PyTorch code: unsupported APIs, CUDA-only code, custom CUDA ops, advice",
     &analyse::AnalyseMain},
    {"migrate", "migrated copy of a project for the target (cuda → npu rewrites), change list and patch",
     &analyse::MigrateMain},
};
const size_t kCommandCount = sizeof(kCommands) / sizeof(kCommands[0]);

}  // namespace portkit::cli
