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
    {"compare", "operator-level comparison of a target dump against a reference dump (accuracy)", &CompareCommand},
    {"overflow", "operators of a dump whose outputs overflow (inf/nan), in execution order", &OverflowCommand},
    {"convert", "dump tensors to .npy or .txt", &ConvertCommand},
    {"extract", "copy the named operators of a dump into a new dump", &ExtractCommand},
    {"prof",
     "profiles: collect, import, export summary|timeline, analyse (advisor), diff, query (tables for notebooks), "
     "cluster (multi-rank)",
     &ProfCommand},
    {"tune",
     "auto-tuning, results kept in a knowledge base:\n"
     "             --job-type=2 (OPAT): MatMul/Conv2D kernels of an operator list, compiled and measured;\n"
     "             --job-type=1 --framework=pytorch (SGAT): how each subgraph of a PyTorch model runs;\n"
     "             --job-type=4 (GDAT): DDP gradient buckets and communication of a PyTorch model;\n"
     "             tune bank list | show OP | export FILE | import FILE: the knowledge base",
     &TuneCommand},
};
const size_t kCommandCount = sizeof(kCommands) / sizeof(kCommands[0]);

}  // namespace portkit::cli
