#pragma once
/// Checks Python sources with CPython's own compiler (`compile(source, path, "exec")`), all of
/// them in one `python3` process: what tree-sitter accepts is not always valid Python (an import
/// above `from __future__`, a misplaced docstring).
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace portkit::analyse {

/// One source to check: the edited text and the original it was made from.
struct PythonCheckInput {
  std::string_view edited;
  std::string_view original;
};

/// The verdict on one input.
struct PythonCheckVerdict {
  bool compiles = true;           ///< the edited text compiles
  bool original_compiles = true;  ///< meaningful only when !compiles
  uint32_t line = 0;              ///< of the first error in the edited text (0: unknown)
  std::string message;            ///< CPython's message for it
};

/// Compiles every edited text (and, where one fails, its original) with `python` (looked up on
/// PATH), in one process, through a temporary folder that is removed afterwards. Errors only when
/// the check cannot run (no python3, no temporary folder, the process failed); the caller then
/// has no CPython verdict.
Expected<std::vector<PythonCheckVerdict>> CompileWithPython(const std::vector<PythonCheckInput>& inputs,
                                                            const std::string& python = "python3");

}  // namespace portkit::analyse
