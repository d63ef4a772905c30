#pragma once
/// Unified diffs (`diff -u` format, as `patch -p1` applies them), from Myers' O(ND) algorithm.
#include <string>
#include <string_view>

namespace portkit {

/// The diff of `before` → `after` with `a/<path>` and `b/<path>` headers and 3 lines of
/// context; empty when the texts are equal.
std::string UnifiedDiff(std::string_view before, std::string_view after, const std::string& path);

}  // namespace portkit
