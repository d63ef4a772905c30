#pragma once
/// Pass 2 over every parsed file with a set of rules, in parallel: findings plus what the
/// project-level modes need (names seen, calls between project functions, function definitions).
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "analyse/project_loader.h"
#include "analyse/rule.h"

namespace portkit::analyse {

/// A call from project code to a project function or class.
struct CallRecord {
  std::string caller;      ///< qualified name of the calling function; empty at module level
  std::string callee;      ///< qualified name of the function that runs (a class's __init__, ...)
  std::string class_name;  ///< the class instantiated, when the call creates an instance
  std::string file;
  uint32_t start_line = 0, end_line = 0;
};

/// A function or method defined in the project.
struct DefinitionRecord {
  std::string qualname;
  std::string file;
  uint32_t line = 0;
  std::vector<std::string> parameters;  ///< names in order, `*`/`**` stripped
};

struct FileAnalysis {
  std::vector<Finding> findings;
  std::set<std::string> seen;  ///< watched names (RuleData::watched_names) the file uses
  std::vector<CallRecord> calls;
  std::vector<DefinitionRecord> definitions;
};

using RuleFactory = std::function<std::vector<std::unique_ptr<Rule>>()>;

/// Runs the rules over every analysable file of `project` (progress is logged per file).
std::vector<FileAnalysis> AnalyseFiles(LoadedProject& project, const RuleData& data, const RuleFactory& make_rules,
                                       ThreadPool& pool, Logger& log);

/// Parameter names of a function_definition node.
std::vector<std::string> ParameterNames(const PySyntax& syn, TSNode def, std::string_view src);

}  // namespace portkit::analyse
