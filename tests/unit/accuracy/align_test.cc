// Operator alignment between two runs: exact LCS when small, windows when large; prefix/suffix.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "accuracy/compare.h"

namespace portkit::accuracy {
namespace {

using Pairs = std::vector<std::pair<long, long>>;

TEST(AlignKeys, IdenticalRunsPairOneToOne) {
  EXPECT_EQ(AlignKeys({"a", "b", "c"}, {"a", "b", "c"}), (Pairs{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_TRUE(AlignKeys({}, {"a"}).empty());
}

TEST(AlignKeys, ExtraOperatorsOnEitherSideStayUnmatched) {
  // The target has a cast before mm and lacks the reference's view.
  EXPECT_EQ(AlignKeys({"cast", "mm", "relu", "sum"}, {"mm", "view", "relu", "sum"}), (Pairs{{1, 0}, {2, 2}, {3, 3}}));
}

// A transformer-sized run (8000 operators a side): the target has an extra cast first, and the
// same cast occurs once near the end of the reference. Greedy matching would jump to that late
// cast and lose almost everything; the windowed LCS keeps every operator but the extra one.
TEST(AlignKeys, LargeRunsAlignInWindows) {
  std::vector<std::string> ref, tgt{"aten::_to_copy"};
  const char* layer[] = {"aten::mm", "aten::add", "aten::gelu", "aten::native_layer_norm", "aten::mul"};
  for (int i = 0; i < 8000; ++i) ref.push_back(layer[i % 5]);
  ref[7990] = "aten::_to_copy";
  for (int i = 0; i < 8000; ++i) tgt.push_back(ref[static_cast<size_t>(i)]);
  // Also drop one operator in the middle of the target, and add two there.
  tgt.erase(tgt.begin() + 4001);
  tgt.insert(tgt.begin() + 5000, {"aten::_to_copy", "aten::_to_copy"});
  auto pairs = AlignKeys(tgt, ref);
  EXPECT_GE(pairs.size(), 7998u);  // 8000 reference ops, one dropped in the target, at most one more lost
  for (size_t k = 1; k < pairs.size(); ++k) {
    ASSERT_LT(pairs[k - 1].first, pairs[k].first);
    ASSERT_LT(pairs[k - 1].second, pairs[k].second);
  }
  for (auto [t, r] : pairs) ASSERT_EQ(tgt[static_cast<size_t>(t)], ref[static_cast<size_t>(r)]);
}

}  // namespace
}  // namespace portkit::accuracy
