// Every replacement that analyse and migrate suggest for a target names an API that exists: it is
// in the target's API surface table (data/targets/<name>/api_surface.tsv).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include <unistd.h>

#include "analyse/affinity.h"
#include "target/target_facts.h"

namespace portkit::analyse {
namespace {
namespace fs = std::filesystem;

// Every name the npu target's data can put in an "Affinity Api Name" column or a migrate edit.
std::vector<std::string> SuggestedNames(const target::TargetFacts& facts, const AffinityTable& affinity) {
  std::vector<std::string> names;
  for (const auto& [rule, api] : facts.fused_apis) names.push_back(api);
  for (const auto& [optimizer, fused] : facts.fused_optimizers) names.push_back(fused);
  for (const auto& [pattern, api] : facts.profile.fusion_apis)
    if (api.rfind(facts.python_module + ".", 0) == 0) names.push_back(api);
  for (const auto& f : affinity.functions) names.push_back(f.replacement);
  for (const auto& c : affinity.classes) names.push_back(c.replacement);
  for (const auto& t : affinity.torch) names.push_back(t.replacement);
  return names;
}

TEST(AffinitySurface, EverySuggestedReplacementIsARealApi) {
  auto facts = target::LoadTarget(PORTKIT_TEST_DATA_DIR, "npu");
  ASSERT_TRUE(facts.ok()) << facts.status().message();
  auto surface = target::LoadApiSurface(facts->dir);
  ASSERT_TRUE(surface.ok()) << surface.status().message();
  ASSERT_GT(surface->size(), 300u);  // op-plugin's npu_* functions and the contrib APIs
  auto affinity = AffinityTable::Load(facts->dir / "affinity.json");
  ASSERT_TRUE(affinity.ok()) << affinity.status().message();
  std::vector<std::string> names = SuggestedNames(*facts, *affinity);
  ASSERT_GE(names.size(), 20u);
  for (const auto& n : names) EXPECT_EQ(surface->count(n), 1u) << n << " is suggested but is not a torch_npu API";
}

TEST(AffinitySurface, IndexPutIsTheContribFunction) {
  auto facts = target::LoadTarget(PORTKIT_TEST_DATA_DIR, "npu");
  ASSERT_TRUE(facts.ok());
  auto surface = target::LoadApiSurface(facts->dir);
  ASSERT_TRUE(surface.ok());
  ASSERT_NE(facts->FusedApi("mask_index_put"), nullptr);
  EXPECT_EQ(*facts->FusedApi("mask_index_put"), "torch_npu.contrib.function.npu_fast_condition_index_put");
  // The name once suggested does not exist at the top level of torch_npu.
  EXPECT_EQ(surface->count("torch_npu.npu_fast_condition_index_put"), 0u);
  EXPECT_EQ(surface->count("torch_npu.npu_rms_norm"), 1u);
  EXPECT_EQ(surface->count("torch_npu.contrib.function.matmul_transpose"), 1u);
}

TEST(AffinitySurface, MatmulTransposeRequiresATransposedOperand) {
  auto affinity = AffinityTable::Load(fs::path(PORTKIT_TEST_DATA_DIR) / "targets" / "npu" / "affinity.json");
  ASSERT_TRUE(affinity.ok());
  const auto* row = affinity->FindTorch("torch.matmul");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->requires_guard, "transposed_second_argument");
  EXPECT_EQ(affinity->FindTorch("torch.roll")->requires_guard, "");
}

TEST(AffinitySurface, MissingTableIsEmptyAndCommentsAreSkipped) {
  fs::path dir = fs::temp_directory_path() / ("portkit_surface_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto none = target::LoadApiSurface(dir);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  std::ofstream(dir / "api_surface.tsv") << "# a comment\nm.f\tsource\r\nm.g\n";
  auto two = target::LoadApiSurface(dir);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::set<std::string>{"m.f", "m.g"}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace portkit::analyse
