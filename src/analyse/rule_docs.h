#pragma once
/// The documentation of every analyser rule, taken at build time from the doc comment that
/// starts each rule file (src/analyse/rules/<family>/<rule>.cc: `// Rule:`, `// What it finds:`,
/// `// Why it matters:`, `// Example:`, `// Use instead:`; cmake/rule_docs.cmake writes the
/// table). `portkit analyse --explain` prints it and the SARIF report carries it as each rule's
/// description and help. The rule name is the stable ID of a finding's rule.
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analyse/finding.h"

namespace portkit::analyse {

struct RuleDoc {
  std::string_view name;    ///< the rule's ID (Finding::rule)
  std::string_view family;  ///< the folder under src/analyse/rules/ ("torch_apis")
  std::string_view file;    ///< the rule's source file, relative to the repository
  std::string_view note;    ///< the rest of the `// Rule:` line ("(Api Type `torch`)"), may be empty
  std::string_view what, why, example, use_instead;
};

/// The generated table, in file order.
std::span<const RuleDoc> GeneratedRuleDocs();

/// Every documented rule, sorted by name.
std::vector<const RuleDoc*> RuleDocs();
/// The doc of rule `name`, or null.
const RuleDoc* FindRuleDoc(std::string_view name);
/// The first sentence of "What it finds" (SARIF shortDescription).
std::string RuleSummary(const RuleDoc& doc);
/// The full doc as plain text: the name, then the four sections, one paragraph each.
std::string RuleDocText(const RuleDoc& doc);
/// The full doc as Markdown (SARIF help.markdown).
std::string RuleDocMarkdown(const RuleDoc& doc);

/// Keeps the findings whose rule is in `select` (every rule when empty) and not in `ignore`.
/// Returns how many were removed.
size_t FilterFindingsByRule(std::vector<Finding>& findings, const std::vector<std::string>& select,
                            const std::vector<std::string>& ignore);

/// Removes the findings whose first line carries an inline suppression: a comment
/// `# portkit: ignore[RULE,...]` naming the finding's rule, or `# portkit: ignore` (every rule).
/// Display paths (`<project>/<rel>`) are read below `root`; a file that cannot be read keeps its
/// findings. Returns how many were removed.
size_t ApplyInlineSuppressions(std::vector<Finding>& findings, std::string_view project, const std::string& root);

}  // namespace portkit::analyse
