// The accuracy engine called as a library (accuracy/api.h): reports as data, no process needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "accuracy/api.h"
#include "core/log.h"
#include "test_dump.h"

namespace portkit::accuracy {
namespace {
namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(PORTKIT_TEST_DATA_DIR) / ".." / "tests" / "fixtures" / "accuracy";

class AccuracyApiTest : public testing::DumpTest {};

const CompareRow* FindRow(const CompareReport& r, const std::string& target_name) {
  auto it =
      std::find_if(r.rows.begin(), r.rows.end(), [&](const CompareRow& row) { return row.target.name == target_name; });
  return it == r.rows.end() ? nullptr : &*it;
}

TEST_F(AccuracyApiTest, RunCompareReturnsRowsVerdictsAndTheFirstDivergence) {
  CompareOptions o;
  o.reference = kFixtures / "ref";
  o.target = kFixtures / "tgt";
  auto report = RunCompare(o, ctx_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->target_ops, 8u);
  EXPECT_EQ(report->reference_ops, 7u);
  EXPECT_EQ(report->matched_ops, 6u);
  EXPECT_EQ(report->replay_ok, 1u);
  EXPECT_EQ(report->rows.size(), 17u);  // the view whose shape changed is one row
  EXPECT_EQ(report->verdict_counts, (std::map<std::string, size_t>{{"No", 7}, {"Unmatched", 2}, {"Yes", 8}}));
  EXPECT_TRUE(report->HasMismatch());
  EXPECT_EQ(report->tensor_pairs_compared, 13u);
  EXPECT_TRUE(report->read_errors.empty());

  // tanh's output (bf16 with a planted nan) goes wrong while its input agrees: the first
  // divergence, judged on matching inputs.
  ASSERT_TRUE(report->first_divergence.has_value());
  EXPECT_EQ(report->first_divergence->name, "aten::tanh");
  EXPECT_EQ(report->first_divergence->index, 2);
  EXPECT_EQ(report->first_divergence->stack, "train.py:12");
  EXPECT_EQ(report->first_divergence_basis, "inputs matched");
  ASSERT_TRUE(report->first_mismatching_output.has_value());
  EXPECT_EQ(report->first_mismatching_output->name, "aten::tanh");

  const CompareRow* mm = FindRow(*report, "aten::mm.forward.1.output.0");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->verdict, Verdict::kYes);
  EXPECT_TRUE(mm->compared && mm->output && !mm->replay);
  EXPECT_EQ(mm->reference.name, "aten::mm.forward.0.output.0");
  EXPECT_EQ(*mm->target.dtype, "F16");
  EXPECT_EQ(*mm->target.shape, (std::vector<int64_t>{4, 6}));
  EXPECT_GT(mm->metrics.at("Cosine"), 0.9999);
  EXPECT_LT(mm->metrics.at("MaxAbsErr"), 0.001);
  ASSERT_TRUE(mm->ulp_threshold.has_value());
  EXPECT_EQ(*mm->ulp_threshold, 1.0);  // fp16 target
  const CompareRow* replay = FindRow(*report, "aten::mm.forward.1.replay.output.0");
  ASSERT_NE(replay, nullptr);
  EXPECT_TRUE(replay->replay);

  const CompareRow* tanh = FindRow(*report, "aten::tanh.forward.2.output.0");
  ASSERT_NE(tanh, nullptr);
  EXPECT_EQ(tanh->verdict, Verdict::kNo);
  EXPECT_EQ(tanh->message, "inf or nan in the data");

  const CompareRow* argmax = FindRow(*report, "aten::argmax.forward.3.output.0");
  ASSERT_NE(argmax, nullptr);
  EXPECT_EQ(argmax->verdict, Verdict::kNo);
  EXPECT_EQ(argmax->message, "integer data differ");

  const CompareRow* masked = FindRow(*report, "aten::masked_fill.forward.7.output.0");
  ASSERT_NE(masked, nullptr);
  EXPECT_EQ(masked->verdict, Verdict::kYes);
  EXPECT_GT(masked->identical_nonfinite, 0u);

  const CompareRow* stats_only = FindRow(*report, "aten::sum.forward.5.output.0");
  ASSERT_NE(stats_only, nullptr);
  EXPECT_EQ(stats_only->verdict, Verdict::kNo);  // judged from the manifests' statistics (a nan)
  EXPECT_TRUE(stats_only->from_statistics);
  EXPECT_FALSE(stats_only->compared);

  ASSERT_EQ(report->unmatched_target_ops.size(), 1u);
  EXPECT_EQ(report->unmatched_target_ops[0].name, "aten::_to_copy");
  EXPECT_TRUE(report->unmatched_reference_ops.empty());
  // The view's output is [4, 6] in the target and [24] in the reference: a shape change.
  ASSERT_EQ(report->shape_changes.size(), 1u);
  EXPECT_EQ(report->shape_changes[0].target.name, "aten::view");
  EXPECT_EQ(report->shape_changes[0].reference_shapes, (std::vector<std::vector<int64_t>>{{24}}));
  // Rows in execution order: the unmatched cast first, where it ran.
  EXPECT_EQ(report->rows.front().target.name, "aten::_to_copy.forward.0.*");
}

TEST_F(AccuracyApiTest, RunCompareResultsDoNotDependOnTheThreadCount) {
  CompareOptions o;
  o.reference = kFixtures / "ref";
  o.target = kFixtures / "tgt";
  o.match = MatchKey::kName;
  o.jobs = 1;
  auto one = RunCompare(o, ctx_);
  o.jobs = 3;
  auto three = RunCompare(o, ctx_);
  ASSERT_TRUE(one.ok() && three.ok());
  ASSERT_EQ(one->rows.size(), three->rows.size());
  for (size_t i = 0; i < one->rows.size(); ++i) {
    EXPECT_EQ(one->rows[i].verdict, three->rows[i].verdict);
    for (const auto& [k, v] : one->rows[i].metrics)
      if (!std::isnan(v)) EXPECT_EQ(v, three->rows[i].metrics.at(k)) << k;
  }
}

TEST_F(AccuracyApiTest, RunCompareErrorsAndReadErrors) {
  CompareOptions o;
  o.reference = kFixtures / "corrupt_manifest";
  o.target = kFixtures / "tgt";
  auto bad = RunCompare(o, ctx_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kParse);
  EXPECT_NE(bad.status().message().find("manifest.jsonl:1"), std::string::npos);

  o.reference = o.target = kFixtures / "corrupt_tensor";
  auto cut = RunCompare(o, ctx_);
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  ASSERT_EQ(cut->read_errors.size(), 3u);  // the report still comes back, listing them
  EXPECT_TRUE(cut->rows[cut->read_errors[0].first].read_error);
  EXPECT_NE(cut->read_errors[0].second.find("truncated"), std::string::npos);
  EXPECT_FALSE(cut->HasMismatch());
}

TEST_F(AccuracyApiTest, RunOverflowListsTheOverflowingOperatorsWithReasons) {
  auto report = RunOverflow({kFixtures / "overflow"}, ctx_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->operators, 3u);
  ASSERT_EQ(report->overflowing.size(), 2u);
  EXPECT_EQ(report->overflowing[0].name, "aten::mul");
  EXPECT_EQ(report->overflowing[0].reason, "output.0: beyond the fp16 range");
  EXPECT_EQ(report->overflowing[1].reason, "output.0: inf or nan");
  EXPECT_FALSE(report->origin.has_value());  // exp's input is already inf
  // The reference's only inf is its attention mask (masked_fill): listed, never the origin.
  auto mask = RunOverflow({kFixtures / "ref"}, ctx_);
  ASSERT_TRUE(mask.ok());
  ASSERT_EQ(mask->overflowing.size(), 1u);
  EXPECT_EQ(mask->overflowing[0].name, "aten::masked_fill");
  EXPECT_FALSE(mask->origin.has_value());
  // The target's tanh turns finite inputs into a nan: the origin.
  auto tgt = RunOverflow({kFixtures / "tgt"}, ctx_);
  ASSERT_TRUE(tgt.ok() && tgt->origin.has_value());
  EXPECT_EQ(tgt->origin->name, "aten::tanh");
}

TEST_F(AccuracyApiTest, RunConvertAndRunExtractReportWhatTheyWrote) {
  auto conv = RunConvert({kFixtures / "ref", tmp_ / "npy", ConvertType::kNpy}, ctx_);
  ASSERT_TRUE(conv.ok()) << conv.status().message();
  EXPECT_EQ(conv->written.size(), 16u);
  EXPECT_TRUE(conv->failed.empty());
  for (const auto& w : conv->written) EXPECT_TRUE(fs::is_regular_file(tmp_ / "npy" / w.file)) << w.file;

  auto cut = RunConvert({kFixtures / "corrupt_tensor", tmp_ / "cut", ConvertType::kTxt}, ctx_);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->input_files_failed, 1u);
  ASSERT_EQ(cut->failed.size(), 1u);
  EXPECT_EQ(cut->failed[0].code, ErrorCode::kParse);

  auto ex = RunExtract({kFixtures / "ref", tmp_ / "sub", {"tanh", "6", "nosuch"}}, ctx_);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  EXPECT_EQ(ex->extracted, (std::vector<std::string>{"aten::tanh.forward.1", "aten::tanh_backward.backward.5",
                                                     "aten::masked_fill.forward.6"}));
  EXPECT_EQ(ex->missing, std::vector<std::string>{"nosuch"});
  EXPECT_TRUE(fs::is_regular_file(tmp_ / "sub" / "manifest.jsonl"));

  auto nothing = RunExtract({kFixtures / "ref", tmp_ / "none", {"nosuch"}}, ctx_);
  ASSERT_FALSE(nothing.ok());
  EXPECT_EQ(nothing.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(tmp_ / "none"));
}

}  // namespace
}  // namespace portkit::accuracy
