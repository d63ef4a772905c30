#pragma once
/// The affinity_apis rule family: calls and hand-written patterns that a faster fused ("affinity")
/// API of the target can replace. Each rule is one file; registry.cc lists them.
#include <memory>
#include <vector>

#include "analyse/rule.h"

namespace portkit::analyse {

std::unique_ptr<Rule> MakeAffinityTorchRule();
std::unique_ptr<Rule> MakeMaskIndexPutRule();
std::unique_ptr<Rule> MakeRmsNormRule();
std::unique_ptr<Rule> MakeRotaryRule();
std::unique_ptr<Rule> MakeSwigluRule();
std::unique_ptr<Rule> MakeAttentionRule();
std::unique_ptr<Rule> MakeFusedOptimizerRule();

std::vector<std::unique_ptr<Rule>> MakeAffinityRules();

/// Helpers shared by the pattern rules.
namespace affinity {
/// Reports an affinity finding.
void Report(RuleContext& ctx, TSNode node, const std::string& name, const std::string& api_type,
            const std::string& replacement, std::string_view rule);
/// The node's parent, skipping parentheses.
TSNode Parent(const PySyntax& syn, TSNode n);
/// True if the subtree of `n` contains a call whose callee text ends with `.name` or is `name`.
bool ContainsCall(const PySyntax& syn, TSNode n, std::string_view src, std::string_view name);
/// True if the subtree of `n` contains a binary operator with `op` (e.g. "@", "**").
bool ContainsOperator(const PySyntax& syn, TSNode n, std::string_view src, std::string_view op);
/// The operator text of a binary_operator node.
std::string_view OperatorOf(TSNode n, std::string_view src);
/// Whether a call event is a call of one of `names` (qualified names, any receiver for methods).
bool IsCallOf(const CallEvent& ev, std::initializer_list<std::string_view> names);
}  // namespace affinity

}  // namespace portkit::analyse
