#pragma once
/// `portkit migrate`: a migrated copy of a project for the target (CUDA → Ascend NPU), with the
/// list of changes and a patch against the original (seed 001's transplant step).
#include <string>
#include <vector>

#include "analyse/python_syntax.h"
#include "core/context.h"

namespace portkit::analyse {

/// One byte-range replacement in a source file.
struct Edit {
  uint32_t start_byte = 0, end_byte = 0;
  std::string replacement;
  uint32_t start_line = 0, end_line = 0;
  std::string operation;  ///< change_list.csv Operation Type
  std::string message;
};

/// Applies non-overlapping edits (sorted by position; later overlapping edits are dropped).
std::string ApplyEdits(std::string_view text, std::vector<Edit>& edits);

struct MigrateOptions {
  std::string input, output;
  std::string target;  ///< a name under data/targets or a folder with a target.json; empty = default
  bool unsafe = false;  ///< also apply affinity replacements that may change numerics
};

int RunMigrate(const MigrateOptions& opt, Context& ctx);
int MigrateMain(int argc, char** argv, Context& ctx);

}  // namespace portkit::analyse
