// What the msprobe compare layout needs of a dump beyond its tensors: the non-tensor arguments and
// None results of each call (in call order), stack.json, and numbers and dtypes spelled as Python
// and torch spell them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "accuracy/dtype.h"
#include "accuracy/msprobe_dump.h"

namespace portkit::accuracy {
namespace {
namespace fs = std::filesystem;

class MsprobeValues : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_msprobe_values_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  fs::path dir_;
};

TEST_F(MsprobeValues, NonTensorArgumentsAndNoneResultsAreKeptInCallOrder) {
  const std::string t = R"({"type": "torch.Tensor", "dtype": "torch.int64", "shape": [2], "Max": 3, "Min": 1, )"
                        R"("Mean": 2.0, "Norm": 3.1622776601683795, "requires_grad": false})";
  Write("dump.json", R"({"task": "statistics", "data": {"Tensor.pow.0.forward": {"input_args": [)" + t +
                         R"(, {"type": "int", "value": 2}, {"type": "float", "value": 1e-05}], "input_kwargs": )"
                         R"({"inplace": {"type": "bool", "value": false}}, "output": [)" +
                         t + R"(, null]}}})");
  auto dump = LoadMsprobeDump(dir_);
  ASSERT_TRUE(dump.ok()) << dump.status().message();
  ASSERT_EQ(dump->ops.size(), 1u);
  const DumpOp& op = dump->ops[0];
  ASSERT_EQ(op.tensors.size(), 2u);
  EXPECT_TRUE(op.tensors[0].integral_stats);
  ASSERT_EQ(op.scalars.size(), 4u);
  EXPECT_EQ(op.scalars[0].key, "input.1");
  EXPECT_EQ(op.scalars[0].type, "int");
  EXPECT_EQ(op.scalars[0].value, "2");
  EXPECT_EQ(op.scalars[0].before, 1u);
  EXPECT_EQ(op.scalars[1].value, "1e-05");
  EXPECT_EQ(op.scalars[2].key, "input.inplace");
  EXPECT_EQ(op.scalars[2].value, "False");
  EXPECT_EQ(op.scalars[3].key, "output.1");
  EXPECT_EQ(op.scalars[3].type, "");
  EXPECT_EQ(op.scalars[3].value, "None");
  EXPECT_EQ(op.scalars[3].before, 2u);
}

TEST_F(MsprobeValues, StackJsonOfBothLayouts) {
  Write("stack.json",
        R"json({"0": [["Functional.linear.0.forward", "Functional.linear.1.forward"], )json"
        R"json(["File a.py, line 1, in f, \n y = g(x)"]], "Tensor.add.0.forward": ["File b.py, line 2"]})json");
  auto stacks = LoadMsprobeStacks(dir_);
  ASSERT_TRUE(stacks.ok()) << stacks.status().message();
  ASSERT_EQ(stacks->size(), 3u);
  EXPECT_EQ(stacks->at("Functional.linear.1.forward"),
            std::vector<std::string>{"File a.py, line 1, in f, \n y = g(x)"});
  EXPECT_EQ(stacks->at("Tensor.add.0.forward"), std::vector<std::string>{"File b.py, line 2"});
  Write("stack.json", "{\"0\": [");
  auto broken = LoadMsprobeStacks(dir_);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().message().rfind((dir_ / "stack.json").string() + ": not valid JSON", 0), 0u)
      << broken.status().message();
  fs::remove(dir_ / "stack.json");
  auto none = LoadMsprobeStacks(dir_);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(PythonSpelling, FloatsAsReprWritesThem) {
  EXPECT_EQ(PythonFloatRepr(1.0), "1.0");
  EXPECT_EQ(PythonFloatRepr(0.0), "0.0");
  EXPECT_EQ(PythonFloatRepr(-0.0), "-0.0");
  EXPECT_EQ(PythonFloatRepr(0.1), "0.1");
  EXPECT_EQ(PythonFloatRepr(1e-5), "1e-05");
  EXPECT_EQ(PythonFloatRepr(0.0001), "0.0001");
  EXPECT_EQ(PythonFloatRepr(100000.0), "100000.0");
  EXPECT_EQ(PythonFloatRepr(1e16), "1e+16");
  EXPECT_EQ(PythonFloatRepr(1234567890123456.7), "1234567890123456.8");
  EXPECT_EQ(PythonFloatRepr(2.0654995441436768), "2.0654995441436768");
  EXPECT_EQ(PythonFloatRepr(-2.5e-300), "-2.5e-300");
  EXPECT_EQ(PythonFloatRepr(INFINITY), "inf");
  EXPECT_EQ(PythonFloatRepr(-INFINITY), "-inf");
  EXPECT_EQ(PythonFloatRepr(NAN), "nan");
}

TEST(PythonSpelling, TorchDTypeNames) {
  EXPECT_EQ(TorchDTypeName("F32"), "torch.float32");
  EXPECT_EQ(TorchDTypeName("BF16"), "torch.bfloat16");
  EXPECT_EQ(TorchDTypeName("F8_E4M3"), "torch.float8_e4m3fn");
  EXPECT_EQ(TorchDTypeName("BOOL"), "torch.bool");
  EXPECT_EQ(TorchDTypeName("C64"), "C64");
}

}  // namespace
}  // namespace portkit::accuracy
