#pragma once
/// Operator alignment for `RunCompare` (api.h): match keys and the pairing of two operator sequences.
#include <cstdint>
#include <string>
#include <vector>

#include "accuracy/dump.h"

namespace portkit::accuracy {

/// What the alignment could not do exactly.
struct AlignStats {
  /// Operators of each run in regions left unmatched because the work bound was reached there
  /// (0 for any pair of runs within the bound: then the alignment is an exact LCS).
  size_t unaligned_target = 0, unaligned_reference = 0;
};

/// The default work bound of AlignKeys: about a minute for runs that share almost nothing;
/// runs that differ by up to ~10⁵ operators on 10⁵-operator dumps stay well inside it.
constexpr uint64_t kAlignBudget = uint64_t{20'000'000'000};

/// Pairs of indices (target, reference) of equal match keys, in order: a longest common
/// subsequence (extra casts or fused ops stay unmatched), exact within the work bound `budget`
/// (Myers' O((N+M)·D) diff: N, M the lengths, D the operators in one run only). Past the bound,
/// small remaining regions are still aligned exactly and larger ones are left unmatched and
/// counted in `stats` (never silently).
std::vector<std::pair<long, long>> AlignKeys(const std::vector<std::string>& target,
                                             const std::vector<std::string>& reference, AlignStats* stats = nullptr,
                                             uint64_t budget = kAlignBudget);

/// An operator's match key: `name|phase`, followed by its output shapes when `with_shapes`;
/// `name`, when given, stands for the op's own (a rename from the mapping file).
std::string OpMatchKey(const DumpOp& op, bool with_shapes, const std::string* name = nullptr);

}  // namespace portkit::accuracy
