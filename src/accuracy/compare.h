#pragma once
/// Operator alignment for `RunCompare` (api.h): match keys and the pairing of two operator sequences.
#include <string>
#include <vector>

#include "accuracy/dump.h"

namespace portkit::accuracy {

/// Pairs of indices (target, reference) of equal match keys: identical sequences pair 1:1,
/// otherwise a longest common subsequence (extra casts or fused ops stay unmatched).
std::vector<std::pair<long, long>> AlignKeys(const std::vector<std::string>& target,
                                             const std::vector<std::string>& reference);

/// An operator's match key: `name|phase`, followed by its output shapes when `with_shapes`;
/// `name`, when given, stands for the op's own (a rename from the mapping file).
std::string OpMatchKey(const DumpOp& op, bool with_shapes, const std::string* name = nullptr);

}  // namespace portkit::accuracy
