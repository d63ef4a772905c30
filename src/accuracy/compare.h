#pragma once
/// `portkit compare REF TARGET -o DIR`: operator-by-operator comparison of two dumps (FORMATS.md §2).
#include <string>
#include <vector>

#include "accuracy/dump.h"
#include "core/context.h"

namespace portkit::accuracy {

/// Pairs of op indices (target, reference) aligned by name and phase: identical sequences pair
/// 1:1, otherwise a longest common subsequence (extra casts or fused ops stay unmatched).
std::vector<std::pair<long, long>> AlignOps(const std::vector<DumpOp>& target, const std::vector<DumpOp>& ref);

int CompareMain(int argc, char** argv, Context& ctx);

}  // namespace portkit::accuracy
