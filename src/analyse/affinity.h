#pragma once
/// Affinity ("fused API") templates of a target: data/targets/<name>/affinity.json.
#include <filesystem>
#include <string>
#include <vector>

#include "analyse/analysis_run.h"
#include "core/status.h"

namespace portkit::analyse {

struct AffinityTable {
  struct Function {
    std::string name;
    std::vector<std::string> parameters;
    std::string replacement;
  };
  struct Class {
    std::string name, parent;
    std::vector<std::string> init, forward;
    std::string replacement;
  };
  struct Torch {
    std::string api, replacement;
    /// Guard a call must pass before the replacement is suggested (empty: none):
    /// "transposed_second_argument" (matmul_transpose(a, b) computes a @ b.transpose(-2, -1)).
    std::string requires_guard;
  };
  std::vector<Function> functions;
  std::vector<Class> classes;
  std::vector<Torch> torch;

  /// Reads the templates; a missing file gives an empty table (a target without templates).
  static Expected<AffinityTable> Load(const std::filesystem::path& path);
  const Torch* FindTorch(const std::string& qname) const;
};

/// Api Type `function` and `class`: project functions/classes whose name and exact parameter
/// lists match a template; their call sites (or, with none, their definitions) become findings.
std::vector<Finding> MatchAffinityTemplates(const AffinityTable& table,
                                            const std::vector<DefinitionRecord>& definitions,
                                            const std::vector<CallRecord>& calls);

}  // namespace portkit::analyse
