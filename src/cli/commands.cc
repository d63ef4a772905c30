#include "cli/commands.h"

#include "cli/accuracy_commands.h"
#include "cli/analyse.h"
#include "cli/migrate.h"
#include "cli/prof.h"
#include "cli/tune.h"

namespace portkit::cli {

const Command kCommands[] = {
    {"analyse", "migration analysis of PyTorch code: unsupported APIs, CUDA-only code, custom CUDA ops, advice",
     &AnalyseCommand},
    {"migrate", "migrated copy of a project for the target (cuda → npu rewrites), change list and patch",
     &MigrateCommand},
    {"compare", "operator-level comparison of a target dump against a reference dump (accuracy)",
     &CompareCommand},
    {"overflow", "operators of a dump whose outputs overflow (inf/nan), in execution order", &OverflowCommand},
    {"convert", "dump tensors to .npy or .txt", &ConvertCommand},
    {"extract", "copy the named operators of a dump into a new dump", &ExtractCommand},
    {"prof", "profiles: collect, import, export summary|timeline, analyse (advisor), diff", &ProfCommand},
    {"tune", "operator auto-tuning (AOE OPAT): MatMul/Conv2D kernels compiled, measured, kept in a knowledge base;\n"
             "             tune bank list | show OP | export FILE | import FILE: the knowledge base",
     &TuneCommand},
};
const size_t kCommandCount = sizeof(kCommands) / sizeof(kCommands[0]);

}  // namespace portkit::cli
