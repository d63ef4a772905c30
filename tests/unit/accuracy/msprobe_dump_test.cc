// msprobe dumps as compare input: dump.json folders written here in msprobe's PyTorch layout
// (statistics mode, md5 mode, tensor mode with .pt names), compared with each other.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "accuracy/api.h"
#include "accuracy/msprobe_dump.h"
#include "core/context.h"
#include "core/log.h"

namespace portkit::accuracy {
namespace {
namespace fs = std::filesystem;

std::string Tensor(const std::string& dtype, const std::string& shape, double max, double min, double mean,
                   double norm, const std::string& extra = "") {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                R"({"type": "torch.Tensor", "dtype": "%s", "shape": %s, "Max": %.17g, "Min": %.17g, "Mean": %.17g, )"
                R"("Norm": %.17g, "requires_grad": true%s})",
                dtype.c_str(), shape.c_str(), max, min, mean, norm, extra.c_str());
  return buf;
}

/// A three-call forward (linear, relu, softmax) and linear's backward; `skew` shifts relu's
/// output statistics (the planted divergence).
std::string DumpJson(const std::string& task, double skew, const std::string& extra = "") {
  std::string in = Tensor("torch.float32", "[4, 8]", 2.0, -2.0, 0.01, 5.0, extra);
  std::string lin = Tensor("torch.float32", "[4, 16]", 3.0, -3.0, 0.02, 9.0, extra);
  std::string relu = Tensor("torch.float32", "[4, 16]", 3.0 + skew, 0.0, 0.7 + skew, 6.0 + skew, extra);
  std::string soft = Tensor("torch.float32", "[4, 16]", 0.4 + skew / 10, 0.01, 0.0625, 0.6, extra);
  return R"({"task": ")" + task + R"(", "level": "L1", "framework": "pytorch", "dump_data_dir": null, "data": {)"
         R"("Functional.linear.0.forward": {"input_args": [)" + in + R"(, {"type": "int", "value": 3}], )"
         R"("input_kwargs": {"bias": null}, "output": [)" + lin + R"(]}, )"
         R"("Functional.relu.0.forward": {"input_args": [)" + lin + R"(], "input_kwargs": {}, "output": [)" + relu + R"(]}, )"
         R"("Tensor.softmax.0.forward": {"input_args": [)" + relu + R"(], "input_kwargs": {"dim": {"type": "int", "value": -1}}, )"
         R"("output": [)" + soft + R"(]}, )"
         R"("Functional.linear.0.backward": {"input": [)" + lin + R"(], "output": [)" + in + R"(, null]}}})";
}

class MsprobeDump : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_msprobe_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path Write(const std::string& name, const std::string& json) {
    fs::path d = dir_ / name / "step0" / "rank0";
    fs::create_directories(d);
    std::ofstream(d / "dump.json") << json;
    return d;
  }
  Logger logger_{nullptr, SystemClock()};
  Context ctx_{logger_, SystemClock(), PORTKIT_TEST_DATA_DIR};
  fs::path dir_;
};

TEST_F(MsprobeDump, CallsBecomeOperatorsInOrderWithTheirTensors) {
  fs::path d = Write("stats", DumpJson("statistics", 0));
  ASSERT_TRUE(IsMsprobeDump(d));
  auto dump = Dump::Load(d);
  ASSERT_TRUE(dump.ok()) << dump.status().message();
  ASSERT_EQ(dump->ops.size(), 4u);
  EXPECT_EQ(dump->ops[0].name, "Functional.linear");
  EXPECT_EQ(dump->ops[0].phase, "forward");
  EXPECT_EQ(dump->ops[0].kind, "Functional");
  EXPECT_EQ(dump->ops[2].name, "Tensor.softmax");
  EXPECT_EQ(dump->ops[3].phase, "backward");
  // linear: one tensor input (the int and the None bias are not tensors) and one output.
  ASSERT_EQ(dump->ops[0].tensors.size(), 2u);
  EXPECT_EQ(dump->ops[0].tensors[0].key, "input.0");
  EXPECT_EQ(dump->ops[0].tensors[0].dtype, "F32");
  EXPECT_EQ(dump->ops[0].tensors[0].shape, (std::vector<int64_t>{4, 8}));
  EXPECT_TRUE(dump->ops[0].tensors[0].has_stats);
  EXPECT_DOUBLE_EQ(dump->ops[0].tensors[0].norm, 5.0);
  EXPECT_EQ(dump->ops[0].tensors[1].key, "output.0");
  EXPECT_TRUE(dump->warning.empty()) << dump->warning;
}

TEST_F(MsprobeDump, StatisticsModeComparisonNamesTheSkewedOperator) {
  CompareOptions o;
  o.reference = Write("ref", DumpJson("statistics", 0));
  o.target = Write("tgt", DumpJson("statistics", 0.5));
  auto r = RunCompare(o, ctx_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->matched_ops, 4u);
  ASSERT_TRUE(r->first_divergence.has_value());
  EXPECT_EQ(r->first_divergence->name, "Functional.relu");

  // Two identical dumps: no culprit.
  o.target = Write("same", DumpJson("statistics", 0));
  auto same = RunCompare(o, ctx_);
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->first_divergence.has_value());
  EXPECT_FALSE(same->HasMismatch());
}

TEST_F(MsprobeDump, Md5ModeChecksumsAndTensorModeIsComparedByStatistics) {
  auto md5 = Dump::Load(Write("md5", DumpJson("statistics", 0, R"(, "md5": "0a1b2c3d")")));
  ASSERT_TRUE(md5.ok());
  EXPECT_EQ(md5->ops[0].tensors[0].crc32, 0x0a1b2c3d);
  auto tensor = Dump::Load(Write("tensor", DumpJson("tensor", 0, R"(, "data_name": "Functional.linear.0.forward.input.0.pt")")));
  ASSERT_TRUE(tensor.ok());
  EXPECT_NE(tensor->warning.find("tensor-mode data (.pt files) is not read"), std::string::npos) << tensor->warning;
}

TEST_F(MsprobeDump, BrokenDumpJsonIsAParseErrorNamingTheFile) {
  fs::path d = Write("bad", R"({"task": "statistics", "data": [1, 2)");
  auto dump = Dump::Load(d);
  ASSERT_FALSE(dump.ok());
  EXPECT_EQ(dump.status().code(), ErrorCode::kParse);
  EXPECT_NE(dump.status().message().find((d / "dump.json").string()), std::string::npos);
  fs::path e = Write("nodata", R"({"task": "statistics"})");
  EXPECT_EQ(Dump::Load(e).status().code(), ErrorCode::kParse);
}

}  // namespace
}  // namespace portkit::accuracy
