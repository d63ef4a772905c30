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
/// `x[cond] = value` that the target's fused masked index_put computes (mask_index_put.cc): x a
/// tensor, one index that IsBoolMask, a value that IsScalar.
bool IsMaskIndexPut(const PySyntax& syn, std::string_view src, TSNode assignment, TSNode target, const Value& base,
                    const Value& index);

// Local data flow (local_flow.cc): syntax only, within one function.
/// The innermost function, lambda, class or module around `n`.
TSNode EnclosingScope(const PySyntax& syn, TSNode n);
/// The right side of the last plain assignment `name = <expr>` of `scope` (not in nested scopes)
/// that ends before `before_byte`; null when there is none.
TSNode PreviousBinding(const PySyntax& syn, std::string_view src, TSNode scope, std::string_view name,
                       uint32_t before_byte);
/// `b.transpose(-2, -1)`, `b.transpose(-1, -2)`, `torch.transpose(b, -2, -1)` or `b.mT`.
bool IsTransposedLastTwo(const PySyntax& syn, TSNode n, std::string_view src);
/// An element-wise bool mask: a comparison (`x < 0`, not `is`/`in`), `~m`, `m1 & m2`, isnan/eq-like
/// calls, or a name last bound to one of these.
bool IsBoolMask(const PySyntax& syn, TSNode n, std::string_view src, int depth = 0);
/// A Python scalar: a number or bool literal, `-1e4`, `float("inf")`, `math.inf`, or a name last
/// bound to one.
bool IsScalar(const PySyntax& syn, TSNode n, std::string_view src, int depth = 0);
/// An expression that always makes a new tensor (arithmetic, clone, zeros, cat, ...).
bool IsFreshTensor(const PySyntax& syn, TSNode n, std::string_view src);
/// Whether `statement` (which mutates the object bound to local `name` in place) may instead bind
/// `name` to a new object without changing what the function does: `name` is a local of a
/// function, last bound to a fresh tensor, not a parameter, global or nonlocal, not seen by a
/// closure, and before the statement (or anywhere in a loop around it) used only in ways that
/// keep no reference to the object (arithmetic, comparisons, shape queries, other item writes).
bool RebindKeepsMeaning(const PySyntax& syn, std::string_view src, TSNode statement, std::string_view name);
/// Whether `n` lies in the branch that runs when a fused path is not taken, within its function:
/// the `else`/`elif` of an `if` whose condition or earlier branch mentions one of `fused_tokens`
/// (`if hasattr(F, "scaled_dot_product_attention"): ... else: <n>`, `if self.fused_attn:`), the
/// branch of `if not <fused>:`, or the `else` part of `<fused call> if <cond> else <n>`.
/// Tokens are matched case-insensitively as substrings.
bool InFallbackOfFused(const PySyntax& syn, std::string_view src, TSNode n,
                       std::initializer_list<std::string_view> fused_tokens);
}  // namespace affinity

}  // namespace portkit::analyse
