// compare's numbers and rows: shortest round-trip formatting, integers compared as integers,
// nan/inf statistics, one-element tensors, unsupported types noted, statistics-only verdicts,
// exact alignment of long runs, rows in execution order, shape changes, the console conclusion.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "accuracy/api.h"
#include "accuracy/compare.h"
#include "accuracy/dump.h"
#include "core/log.h"
#include "render/compare_render.h"
#include "test_dump.h"

namespace portkit::accuracy {
namespace {
namespace fs = std::filesystem;
using testing::F32;
using testing::I64;
using testing::TestOp;
using testing::TestTensor;
using testing::WriteDump;

class CompareExactTest : public testing::DumpTest {
 protected:
  CompareReport Compare(const std::vector<TestOp>& ref, const std::vector<TestOp>& tgt,
                        MatchKey match = MatchKey::kNameAndShape, uint64_t budget = 0) {
    return CompareDumps(ref, tgt, match, budget);
  }
};

const CompareRow* Row(const CompareReport& r, const std::string& target_name) {
  for (const auto& row : r.rows)
    if (row.target.name == target_name) return &row;
  return nullptr;
}

TEST(FormatNumber, ShortestRoundTripAtAnyMagnitude) {
  using render::FormatNumber;
  EXPECT_EQ(FormatNumber(3e38), "3e+38");
  EXPECT_EQ(FormatNumber(static_cast<double>(std::numeric_limits<float>::lowest())), "-3.4028234663852886e+38");
  EXPECT_EQ(FormatNumber(0.1), "0.1");
  EXPECT_EQ(FormatNumber(1.0), "1");
  EXPECT_EQ(FormatNumber(1e-9), "1e-09");
  EXPECT_EQ(FormatNumber(NAN), "nan");
  EXPECT_EQ(FormatNumber(-INFINITY), "-inf");
  for (double v : {3e38, 1.0 / 3, 123456789.123, 2.2250738585072014e-308, 9007199254740993.0})
    EXPECT_EQ(std::stod(FormatNumber(v)), v);
}

TEST_F(CompareExactTest, HugeValuesAreWrittenWithTheirMagnitudeInEveryReport) {
  const float lowest = std::numeric_limits<float>::lowest();
  auto r = Compare({{"aten::masked_fill", "forward", {F32("output.0", {lowest, 1.0f, 3e38f})}}},
                   {{"aten::masked_fill", "forward", {F32("output.0", {lowest, 1.0f, 3e38f})}}});
  std::string csv = render::CompareCsv(r);
  EXPECT_NE(csv.find("-3.4028234663852886e+38"), std::string::npos) << csv;
  EXPECT_NE(csv.find("3.0000000054977558e+38"), std::string::npos) << csv;  // 3e38f as a double
  EXPECT_EQ(csv.find("0000000000000000000"), std::string::npos) << csv;     // no %f expansions
}

TEST_F(CompareExactTest, Int64AboveTwoToThe53IsComparedAsIntegers) {
  const int64_t big = (int64_t{1} << 60);
  auto r = Compare({{"aten::argmax", "forward", {I64("output.0", {big, 7, -big})}}},
                   {{"aten::argmax", "forward", {I64("output.0", {big + 1, 7, -big})}}});
  const CompareRow* row = Row(r, "aten::argmax.forward.0.output.0");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->verdict, Verdict::kNo);  // big and big+1 are the same double
  EXPECT_EQ(row->mismatched_elements, 1u);
  EXPECT_EQ(row->metrics.at("MaxAbsErr"), 1.0);
  std::vector<uint64_t> u{~uint64_t{0}, 3};
  std::vector<uint64_t> u2{~uint64_t{0} - 1, 3};
  TestTensor a{"output.0", "U64", {2}, testing::Bytes(u), ""}, b{"output.0", "U64", {2}, testing::Bytes(u2), ""};
  auto r2 = Compare({{"aten::bitwise_and", "forward", {a}}}, {{"aten::bitwise_and", "forward", {b}}});
  EXPECT_EQ(r2.rows.at(0).verdict, Verdict::kNo);
  auto same = Compare({{"aten::bitwise_and", "forward", {a}}}, {{"aten::bitwise_and", "forward", {a}}});
  EXPECT_EQ(same.rows.at(0).verdict, Verdict::kYes);
}

TEST_F(CompareExactTest, AllNanIsNotApplicableWithNanStatistics) {
  auto r = Compare({{"aten::div", "forward", {F32("output.0", {NAN, NAN, NAN})}}},
                   {{"aten::div", "forward", {F32("output.0", {NAN, NAN, NAN})}}});
  const CompareRow& row = r.rows.at(0);
  // Nothing finite to judge, and the same nan in both runs: not a divergence either.
  EXPECT_EQ(row.verdict, Verdict::kNotApplicable) << row.message;
  EXPECT_TRUE(r.first_divergence == std::nullopt || r.first_divergence->name != "aten::div");
  ASSERT_TRUE(row.target.stats.has_value());
  EXPECT_TRUE(std::isnan(row.target.stats->max));
  EXPECT_TRUE(std::isnan(row.target.stats->min));
  // Some nan: statistics nan (as torch reports them), the shared nan positions left out.
  auto part = Compare({{"aten::log", "forward", {F32("output.0", {NAN, 1, 2})}}},
                      {{"aten::log", "forward", {F32("output.0", {NAN, 1, 2})}}});
  EXPECT_EQ(part.rows.at(0).verdict, Verdict::kYes);
  EXPECT_TRUE(std::isnan(part.rows.at(0).reference.stats->max));
}

TEST_F(CompareExactTest, OneElementTensorsAreJudgedByRelativeError) {
  TestTensor loss_ref = F32("output.0", {2.0f}), loss_tgt = F32("output.0", {2.9f});
  EXPECT_TRUE(loss_ref.shape.empty());  // 0-d
  auto r = Compare({{"aten::mse_loss", "forward", {loss_ref}}}, {{"aten::mse_loss", "forward", {loss_tgt}}});
  EXPECT_EQ(r.rows.at(0).verdict, Verdict::kNo);
  EXPECT_EQ(r.rows.at(0).metrics.at("Cosine"), 1.0);  // what used to pass it
  auto close = Compare({{"aten::mse_loss", "forward", {loss_ref}}},
                       {{"aten::mse_loss", "forward", {F32("output.0", {2.0001f})}}});
  EXPECT_EQ(close.rows.at(0).verdict, Verdict::kYes);
}

TEST_F(CompareExactTest, TypesThatAreNotComparedGetARowSayingWhy) {
  TestTensor complex{
      "output.0", "complex64", {4}, {}, "not saved: safetensors has no element type for torch.complex64"};
  std::vector<uint8_t> fp8{0x38, 0x40, 0xb8, 0x00};  // 1, 2, -1, 0 in e4m3fn
  std::vector<uint16_t> u16{1, 65535, 3, 4};
  TestTensor f8{"output.0", "F8_E4M3", {4}, fp8, ""}, uu{"output.1", "U16", {4}, testing::Bytes(u16), ""};
  std::vector<TestOp> ops{{"aten::fft_fft", "forward", {F32("input.0", {1, 2, 3, 4}), complex}},
                          {"aten::_to_copy", "forward", {f8, uu}}};
  auto r = Compare(ops, ops);
  const CompareRow* c = Row(r, "aten::fft_fft.forward.0.output.0");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kNotApplicable);
  EXPECT_NE(c->message.find("complex64"), std::string::npos) << c->message;
  EXPECT_EQ(Row(r, "aten::_to_copy.forward.1.output.0")->verdict, Verdict::kYes);
  EXPECT_EQ(Row(r, "aten::_to_copy.forward.1.output.1")->verdict, Verdict::kYes);
  EXPECT_TRUE(r.read_errors.empty());
}

TEST_F(CompareExactTest, StatisticsOnlyDumpsAreJudgedFromTheirStatistics) {
  TestOp ref{"aten::sum", "forward", {F32("input.0", {1, 2, 3}), F32("output.0", {30.5f, 1, 2})}, true};
  TestOp tgt{"aten::sum", "forward", {F32("input.0", {1, 2, 3}), F32("output.0", {91.5f, 1, 2})}, true};
  auto r = Compare({ref}, {tgt});
  const CompareRow* out = Row(r, "aten::sum.forward.0.output.0");
  ASSERT_NE(out, nullptr);
  EXPECT_TRUE(out->from_statistics);
  EXPECT_EQ(out->verdict, Verdict::kNo) << out->message;
  EXPECT_NEAR(out->metrics.at("MaxRelDiff"), 2.0, 1e-12);
  EXPECT_EQ(Row(r, "aten::sum.forward.0.input.0")->verdict, Verdict::kYes);
  // The input agrees and the output does not: the operator is named.
  ASSERT_TRUE(r.first_divergence.has_value());
  EXPECT_EQ(r.first_divergence->name, "aten::sum");
  TestOp close = tgt;
  close.tensors[1] = F32("output.0", {30.5001f, 1, 2});
  auto ok = Compare({ref}, {close});
  EXPECT_EQ(Row(ok, "aten::sum.forward.0.output.0")->verdict, Verdict::kYes);
  EXPECT_FALSE(ok.first_divergence.has_value());
}

/// Names of `count` operators cycling through a transformer layer's operators.
std::vector<std::string> LayerKeys(size_t count) {
  const char* layer[] = {"aten::mm",  "aten::add",     "aten::gelu", "aten::native_layer_norm",
                         "aten::mul", "aten::_softmax"};
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) out.push_back(std::string(layer[i % 6]) + "|forward");
  return out;
}

/// The same bits, nan equal to nan.
bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

// Two fp32 tensors take the fused fp32 pass (metrics/fused_f32.cc); a reference stored as fp64
// holding the same values takes the general loops over decoded doubles. Every metric and
// statistic agrees to the bit: over five whole chunks and a tail, with zeros of both signs, equal
// elements, fp32 subnormals, small values and magnitudes from 1e-30 to 1e30, and with an inf and a
// nan in one chunk (that chunk then goes the general way, the others stay fused).
TEST_F(CompareExactTest, Fp32FusedPassEqualsTheGeneralLoopsToTheBit) {
  uint64_t state = 99;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  };
  for (int special = 0; special < 2; ++special) {
    std::vector<float> ref, tgt;
    for (int i = 0; i < 5 * 1024 + 37; ++i) {
      // Mostly within six decades, so that every element moves the sums' last bits; one in 50
      // from 1e-30 to 1e30.
      double mag = i % 50 == 7 ? std::pow(10.0, -30 + 60 * next()) : std::pow(10.0, -3 + 6 * next());
      float b = static_cast<float>((next() < 0.5 ? -1 : 1) * (i % 3 == 0 ? next() : mag));
      if (i % 101 == 0) b = 0.0f;
      if (i % 103 == 0) b = -0.0f;
      if (i % 107 == 0) b = std::ldexp(1.0f, -140);  // fp32 subnormal
      if (i % 109 == 0) b = 1e-7f;                   // small: judged by absolute error
      float n = i % 5 == 0 ? b : static_cast<float>(b * (1 + 1e-3 * (next() - 0.5)));
      if (i % 113 == 0) n = 0.0f;
      ref.push_back(b), tgt.push_back(n);
    }
    if (special) tgt[2 * 1024 + 5] = NAN, ref[2 * 1024 + 9] = INFINITY, tgt[2 * 1024 + 9] = INFINITY;
    std::vector<double> ref64(ref.begin(), ref.end());
    TestTensor wide{"output.0", "F64", {static_cast<int64_t>(ref.size())}, testing::Bytes(ref64), ""};
    auto fused =
        Compare({{"aten::mul", "forward", {F32("output.0", ref)}}}, {{"aten::mul", "forward", {F32("output.0", tgt)}}});
    auto general = Compare({{"aten::mul", "forward", {wide}}}, {{"aten::mul", "forward", {F32("output.0", tgt)}}});
    ASSERT_EQ(fused.rows.size(), 1u);
    ASSERT_EQ(general.rows.size(), 1u);
    const CompareRow& a = fused.rows[0];
    const CompareRow& b = general.rows[0];
    size_t compared = 0;
    for (const auto& [name, v] : b.metrics) {
      ASSERT_EQ(a.metrics.count(name), 1u) << name;
      EXPECT_TRUE(SameBits(a.metrics.at(name), v)) << name << ": " << a.metrics.at(name) << " vs " << v;
      ++compared;
    }
    EXPECT_GE(compared, 12u);
    ASSERT_TRUE(a.target.stats && b.target.stats && a.reference.stats && b.reference.stats);
    for (auto [x, y] :
         {std::pair{*a.target.stats, *b.target.stats}, std::pair{*a.reference.stats, *b.reference.stats}}) {
      EXPECT_TRUE(SameBits(x.max, y.max) && SameBits(x.min, y.min)) << x.max << " " << x.min;
      EXPECT_TRUE(SameBits(x.mean, y.mean) && SameBits(x.norm, y.norm)) << x.mean << " " << x.norm;
    }
    EXPECT_EQ(a.verdict, b.verdict);
    EXPECT_EQ(a.message, b.message);
  }
}

TEST(AlignKeysExact, TwentyThousandMatchingOperatorsAreAllMatched) {
  // The case that lost the first 4,107 of 20,000 operators: the target starts with 5,000 operators
  // the reference does not have (a window with nothing in common), and has casts spread through.
  std::vector<std::string> ref = LayerKeys(20000), tgt;
  for (int i = 0; i < 5000; ++i) tgt.push_back("aten::_to_copy|forward");
  for (size_t i = 0; i < ref.size(); ++i) {
    tgt.push_back(ref[i]);
    if (i % 997 == 0) tgt.push_back("aten::_to_copy|forward");
  }
  AlignStats stats;
  auto pairs = AlignKeys(tgt, ref, &stats);
  ASSERT_EQ(pairs.size(), 20000u);
  for (size_t k = 0; k < pairs.size(); ++k) {
    ASSERT_EQ(static_cast<size_t>(pairs[k].second), k);
    ASSERT_EQ(tgt[static_cast<size_t>(pairs[k].first)], ref[k]);
  }
  EXPECT_EQ(stats.unaligned_target + stats.unaligned_reference, 0u);
}

TEST(AlignKeysExact, MatchesTheDynamicProgrammingLength) {
  // Random-ish sequences over a small alphabet: the length equals the DP optimum.
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1103515245u + 12345u, (seed >> 16) % 4; };
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<std::string> a, b;
    for (int i = 0; i < 40 + trial; ++i) a.push_back(std::string(1, static_cast<char>('a' + next())));
    for (int i = 0; i < 35 + 2 * trial; ++i) b.push_back(std::string(1, static_cast<char>('a' + next())));
    std::vector<std::vector<int>> dp(a.size() + 1, std::vector<int>(b.size() + 1, 0));
    for (size_t i = a.size(); i-- > 0;)
      for (size_t j = b.size(); j-- > 0;)
        dp[i][j] = a[i] == b[j] ? dp[i + 1][j + 1] + 1 : std::max(dp[i + 1][j], dp[i][j + 1]);
    auto pairs = AlignKeys(a, b);
    ASSERT_EQ(static_cast<int>(pairs.size()), dp[0][0]) << trial;
    for (size_t k = 0; k < pairs.size(); ++k) {
      ASSERT_EQ(a[static_cast<size_t>(pairs[k].first)], b[static_cast<size_t>(pairs[k].second)]);
      if (k) ASSERT_TRUE(pairs[k - 1].first < pairs[k].first && pairs[k - 1].second < pairs[k].second);
    }
  }
}

TEST(AlignKeysExact, PastTheWorkBoundWhatIsLeftOutIsCounted) {
  std::vector<std::string> a, b;
  for (int i = 0; i < 30000; ++i) a.push_back("a" + std::to_string(i % 100));
  for (int i = 0; i < 30000; ++i) b.push_back("a" + std::to_string((i * 7) % 101));
  AlignStats stats;
  auto pairs = AlignKeys(a, b, &stats, 1000);
  EXPECT_GT(stats.unaligned_target, 0u);
  EXPECT_GT(stats.unaligned_reference, 0u);
  EXPECT_EQ(pairs.size() + stats.unaligned_target <= a.size(), true);
}

TEST_F(CompareExactTest, TwentyThousandOperatorDumpsMatchEveryMatchingOperator) {
  std::vector<TestOp> ref, tgt;
  auto names = LayerKeys(20000);
  const TestOp cast{"aten::_to_copy", "forward", {F32("output.0", {1, 2})}, true};
  for (int i = 0; i < 5000; ++i) tgt.push_back(cast);
  size_t casts = 5000;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string name = names[i].substr(0, names[i].find('|'));
    TestOp op{name, "forward", {F32("output.0", {1, 2})}, true};
    ref.push_back(op);
    tgt.push_back(op);
    if (i % 997 == 0) tgt.push_back(cast), ++casts;
  }
  auto r = Compare(ref, tgt);
  EXPECT_EQ(r.matched_ops, 20000u);
  EXPECT_EQ(r.unmatched_target_ops.size(), casts);
  EXPECT_TRUE(r.unmatched_reference_ops.empty());
  EXPECT_EQ(r.unaligned_target_ops, 0u);
  // With a tiny work bound the runs are not aligned exactly, and the report says so.
  auto bounded = Compare(ref, tgt, MatchKey::kNameAndShape, 10);
  EXPECT_GT(bounded.unaligned_target_ops, 0u);
  ASSERT_FALSE(bounded.warnings.empty());
  EXPECT_NE(bounded.warnings.back().find("left unmatched"), std::string::npos);
}

TEST_F(CompareExactTest, UnmatchedOperatorsAreListedWhereTheyRan) {
  auto op = [](const char* name) { return TestOp{name, "forward", {F32("output.0", {1, 2})}}; };
  auto r = Compare({op("aten::a"), op("aten::b"), op("aten::y"), op("aten::c")},
                   {op("aten::a"), op("aten::x"), op("aten::b"), op("aten::c")});
  std::vector<std::string> order;
  for (const auto& row : r.rows)
    order.push_back(row.target.name.empty() ? "ref:" + row.reference.name : row.target.name);
  EXPECT_EQ(order,
            (std::vector<std::string>{"aten::a.forward.0.output.0", "aten::x.forward.1.*", "aten::b.forward.2.output.0",
                                      "ref:aten::y.forward.2.*", "aten::c.forward.3.output.0"}));
}

TEST_F(CompareExactTest, AShapeChangeIsOneRowNamingBothShapes) {
  auto r = Compare({{"aten::view", "forward", {F32("output.0", {1, 2, 3, 4}, {4})}}},
                   {{"aten::view", "forward", {F32("output.0", {1, 2, 3, 4}, {2, 2})}}});
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].target.name, "aten::view.forward.0.*");
  EXPECT_EQ(r.rows[0].reference.name, "aten::view.forward.0.*");
  EXPECT_NE(r.rows[0].message.find("[2, 2] in the target, [4] in the reference"), std::string::npos)
      << r.rows[0].message;
  ASSERT_EQ(r.shape_changes.size(), 1u);
  EXPECT_TRUE(r.unmatched_target_ops.empty() && r.unmatched_reference_ops.empty());
  auto lines = render::CompareConclusion(r);
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("changed their output shapes") != std::string::npos;
  }));
}

TEST_F(CompareExactTest, TheConsoleNeverSaysNoDivergenceWhileRowsAreNo) {
  // Only argmax indices differ (a tie broken the other way): no culprit, but not "no divergence".
  std::vector<float> x{1, 3, 3, 0};
  auto r = Compare({{"aten::argmax", "forward", {F32("input.0", x), I64("output.0", {1})}}},
                   {{"aten::argmax", "forward", {F32("input.0", x), I64("output.0", {2})}}});
  EXPECT_TRUE(r.HasMismatch());
  EXPECT_FALSE(r.first_divergence.has_value());
  auto lines = render::CompareConclusion(r);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].find("No diverging"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("1 tensors are judged No"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace portkit::accuracy

namespace portkit::accuracy {
namespace {

// compare reads each dump twice, one operator at a time (the keys first, then the rows), so that
// only the operators between two matched ones are held: DumpReader gives what Dump::Load gives.
TEST_F(CompareExactTest, DumpReaderGivesTheOperatorsOfLoadInOrderAndItsWarnings) {
  std::vector<TestOp> ops;
  for (int i = 0; i < 5; ++i) ops.push_back({"aten::op" + std::to_string(i), "forward", {F32("output.0", {1, 2})}});
  const fs::path dir = tmp_ / "d";
  WriteDump(dir, ops);
  {  // a cut last line (a crash mid-write): tolerated and reported, like Load
    std::ofstream(dir / "manifest.jsonl", std::ios::app) << "{\"index\": 5, \"name\": \"aten::cut";
  }
  auto loaded = Dump::Load(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  auto reader = DumpReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  std::vector<DumpOp> read;
  for (DumpOp op;;) {
    auto more = reader->Next(op);
    ASSERT_TRUE(more.ok()) << more.status().message();
    if (!*more) break;
    read.push_back(op);
  }
  ASSERT_EQ(read.size(), 5u);
  ASSERT_EQ(loaded->ops.size(), 5u);
  for (size_t i = 0; i < read.size(); ++i) {
    EXPECT_EQ(read[i].name, loaded->ops[i].name);
    EXPECT_EQ(read[i].index, static_cast<int64_t>(i));
    ASSERT_EQ(read[i].tensors.size(), 1u);
    EXPECT_EQ(read[i].tensors[0].shape, std::vector<int64_t>{2});
  }
  EXPECT_EQ(reader->count(), 5u);
  EXPECT_TRUE(reader->complete());
  EXPECT_NE(reader->warning().find("incomplete last record"), std::string::npos) << reader->warning();
  EXPECT_EQ(reader->warning(), loaded->warning);
  auto again = reader->Next(read.front());  // stays at the end
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);

  // A damaged record that is not the last line is an error naming the manifest and the line.
  {
    std::ofstream m(dir / "manifest.jsonl", std::ios::app);
    m << "\n{\"index\": 6, \"name\": \"aten::x\", \"tensors\": []}\n";
  }
  auto broken = DumpReader::Open(dir);
  ASSERT_TRUE(broken.ok());
  Status error = Status::Ok();
  for (DumpOp op;;) {
    auto more = broken->Next(op);
    if (!more.ok()) {
      error = more.status();
      break;
    }
    ASSERT_TRUE(*more) << "the damaged line 6 was not reported";
  }
  EXPECT_NE(error.message().find("manifest.jsonl:6"), std::string::npos) << error.message();
}

// The reports of a compare whose matched operators are far apart (long unmatched stretches on
// both sides, replayed outputs paired with an earlier reference operator) equal those of the same
// dumps compared with every operator held: rows in execution order, the divergence found.
TEST_F(CompareExactTest, RowsOfSeparatedMatchesAndReplaysAreInExecutionOrder) {
  std::vector<TestOp> ref, tgt;
  for (int i = 0; i < 300; ++i) ref.push_back({"aten::only_ref", "forward", {F32("output.0", {1})}});
  ref.push_back({"aten::mul", "forward", {F32("input.0", {1, 2}), F32("output.0", {2, 4})}});
  for (int i = 0; i < 200; ++i) tgt.push_back({"aten::only_tgt", "forward", {F32("output.0", {1})}});
  TestOp mul{
      "aten::mul", "forward", {F32("input.0", {1, 2}), F32("output.0", {2, 4.5f}), F32("replay.output.0", {2, 4.5f})}};
  mul.replay = "{\"status\": \"ok\", \"reference_index\": 300}";
  tgt.push_back(mul);
  auto report = Compare(ref, tgt);
  ASSERT_EQ(report.matched_ops, 1u);
  EXPECT_EQ(report.unmatched_target_ops.size(), 200u);
  EXPECT_EQ(report.unmatched_reference_ops.size(), 300u);
  ASSERT_TRUE(report.first_divergence.has_value());
  EXPECT_EQ(report.first_divergence->name, "aten::mul");
  EXPECT_EQ(report.first_divergence_basis, "replay");
  // The matched operator's rows come after every unmatched one (it ran last in both runs).
  size_t first_matched = report.rows.size();
  for (size_t i = 0; i < report.rows.size(); ++i)
    if (report.rows[i].target_op >= 0) {
      first_matched = std::min(first_matched, i);
    } else {
      EXPECT_LT(i, first_matched) << "an unmatched operator after the matched one";
    }
  EXPECT_EQ(report.rows.size() - first_matched, 3u);
}

// Rows spilled to an unnamed temporary file (CompareOptions::spill_dir, as the CLI runs compare)
// render exactly as rows kept in memory, over several batches of rows, with the first divergence
// in a later batch than the first; nothing is left in the folder.
TEST_F(CompareExactTest, SpilledRowsRenderAsRowsKeptInMemory) {
  std::vector<TestOp> ref, tgt;
  for (int i = 0; i < 6000; ++i) {
    const char* name = i % 3 == 0 ? "aten::mm" : i % 3 == 1 ? "aten::add" : "aten::relu";
    const float x = static_cast<float>(i % 17) + 0.5f;
    TestOp op{name,
              "forward",
              {F32("input.0", {x, 2 * x, 3 * x, 4 * x}), F32("input.1", {1, 2, 3, 4}),
               F32("output.0", {x, x + 1, x + 2, x + 3})},
              i % 500 != 0};  // tensor data every 500th operator, statistics only otherwise
    ref.push_back(op);
    if (i == 5000) op.tensors[2] = F32("output.0", {x, -x, 7 * x, 0});  // its own error
    if (i == 3000) tgt.push_back(TestOp{"aten::extra", "forward", {F32("output.0", {1, 2})}, true});
    tgt.push_back(op);
  }
  WriteDump(tmp_ / "ref", ref);
  WriteDump(tmp_ / "tgt", tgt);
  CompareOptions o;
  o.reference = tmp_ / "ref";
  o.target = tmp_ / "tgt";
  o.msprobe_names = true;
  auto kept = RunCompare(o, ctx_);
  o.spill_dir = tmp_;
  auto spilled = RunCompare(o, ctx_);
  ASSERT_TRUE(kept.ok() && spilled.ok());
  EXPECT_EQ(kept->rows.size(), 18001u);
  EXPECT_EQ(kept->row_count, 18001u);
  EXPECT_TRUE(spilled->rows.empty());
  EXPECT_EQ(spilled->row_count, 18001u);
  ASSERT_TRUE(spilled->first_divergence.has_value());
  EXPECT_EQ(spilled->first_divergence->index, 5001);
  EXPECT_EQ(spilled->first_divergence_basis, "inputs matched");
  EXPECT_EQ(spilled->verdict_counts, kept->verdict_counts);
  EXPECT_EQ(spilled->verdict_counts.at("No"), 1u);
  EXPECT_EQ(spilled->tensor_pairs_compared, kept->tensor_pairs_compared);
  EXPECT_EQ(render::CompareCsv(*spilled), render::CompareCsv(*kept));
  EXPECT_EQ(render::CompareMsprobeCsv(*spilled), render::CompareMsprobeCsv(*kept));
  EXPECT_EQ(render::CompareJson(*spilled), render::CompareJson(*kept));
  EXPECT_EQ(render::CompareHtml(*spilled), render::CompareHtml(*kept));
  EXPECT_EQ(render::CompareConclusion(*spilled), render::CompareConclusion(*kept));
  size_t n = 0;
  ASSERT_TRUE(spilled
                  ->ForEachRow([&](const CompareRow& r) {
                    const CompareRow& k = kept->rows[n++];
                    EXPECT_EQ(r.target.name, k.target.name);
                    EXPECT_EQ(r.reference.stats.has_value(), k.reference.stats.has_value());
                    EXPECT_EQ(r.metrics.count("Cosine"), k.metrics.count("Cosine"));
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_EQ(n, 18001u);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp_), fs::directory_iterator()), 2);  // ref and tgt only

  o.spill_dir = tmp_ / "missing";
  auto nowhere = RunCompare(o, ctx_);
  ASSERT_FALSE(nowhere.ok());
  EXPECT_EQ(nowhere.status().code(), ErrorCode::kIo);
  EXPECT_NE(nowhere.status().message().find("cannot create a temporary file for compare's rows"), std::string::npos);
}

}  // namespace
}  // namespace portkit::accuracy
