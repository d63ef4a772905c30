#pragma once
/// `portkit compare REF TARGET -o DIR`: operator-by-operator comparison of two dumps (FORMATS.md §2).
#include <string>
#include <vector>

#include "accuracy/dump.h"
#include "core/context.h"

namespace portkit::accuracy {

/// Pairs of indices (target, reference) of equal match keys: identical sequences pair 1:1,
/// otherwise a longest common subsequence (extra casts or fused ops stay unmatched).
std::vector<std::pair<long, long>> AlignKeys(const std::vector<std::string>& target,
                                             const std::vector<std::string>& reference);

/// An operator's match key: `name|phase`, followed by its output shapes when `with_shapes`;
/// `name`, when given, stands for the op's own (a rename from the mapping file).
std::string OpMatchKey(const DumpOp& op, bool with_shapes, const std::string* name = nullptr);

int CompareMain(int argc, char** argv, Context& ctx);

}  // namespace portkit::accuracy
