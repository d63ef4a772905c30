#include "tune/op_desc.h"

#include <gtest/gtest.h>

namespace portkit::tune {
namespace {

TEST(OpListTest, ParsesTheIssueExample) {
  auto list = ParseOpList(R"({"name": "m", "ops": [
    {"op_name": "fc1", "op_type": "MatMul", "inputs": [[64, 128], [128, 96]], "dtype": "float32", "count": 4},
    {"op_name": "conv1", "op_type": "Conv2D", "inputs": [[1, 8, 16, 16], [16, 8, 3, 3]],
     "attrs": {"stride": [1, 1], "padding": [1, 1], "groups": 1}, "dtype": "float32", "count": 2}]})",
                          "ops.json");
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(list->name, "m");
  ASSERT_EQ(list->ops.size(), 2u);
  EXPECT_EQ(list->ops[0].count, 4);
  EXPECT_EQ(Signature(list->ops[0]), "MatMul|float32|ND|[64,128],[128,96]|bias=0");
  EXPECT_EQ(Signature(list->ops[1]),
            "Conv2D|float32|NCHW|[1,8,16,16],[16,8,3,3]|bias=0|stride=[1,1]|padding=[1,1]|groups=1");
}

TEST(OpListTest, UnknownTypesAndDtypesAreListedUntuned) {
  auto list = ParseOpList(R"({"ops": [{"op_type": "Relu", "inputs": [[4]]},
    {"op_name": "h", "op_type": "MatMul", "inputs": [[2, 3], [3, 4]], "dtype": "float16"}]})",
                          "ops.json");
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_TRUE(list->ops.empty());
  ASSERT_EQ(list->untuned.size(), 2u);
  EXPECT_EQ(list->untuned[0].op.name, "Relu");
  EXPECT_EQ(list->untuned[0].reason, "operator type Relu has no tunable kernel (MatMul and Conv2D have)");
  EXPECT_EQ(list->untuned[1].reason, "dtype float16 is not tuned (float32 kernels only)");
}

TEST(OpListTest, UnknownTypesAreUntunedWhateverTheirInputs) {
  auto list = ParseOpList(R"({"ops": [{"op_type": "Relu"}, {"op_type": "Add", "inputs": 3},
    {"op_type": "Cat", "inputs": [[1, "x"], [2, 2]], "attrs": 7}]})",
                          "ops.json");
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_TRUE(list->ops.empty());
  ASSERT_EQ(list->untuned.size(), 3u);
  EXPECT_EQ(list->untuned[0].reason, "operator type Relu has no tunable kernel (MatMul and Conv2D have)");
  EXPECT_EQ(list->untuned[1].op.type, "Add");
  ASSERT_EQ(list->untuned[2].op.inputs.size(), 1u);  // the shape that parses is kept
  EXPECT_EQ(list->untuned[2].op.inputs[0], (std::vector<int64_t>{2, 2}));
}

TEST(OpListTest, ValidateOpAppliesTheOpListChecks) {
  OpDesc op;
  op.type = "MatMul";
  op.inputs = {{4, 3}, {5, 2}};
  std::string reason;
  auto bad = ValidateOp(op, "prof", &reason);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("prof.inputs: MatMul inner dimensions differ", 0), 0u);
  op.inputs = {{1 << 20, 1 << 20}, {1 << 20, 2}};
  auto big = ValidateOp(op, "prof", &reason);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(reason.rfind("too large to tune here", 0), 0u) << reason;
  op.inputs = {{4, 3}, {3, 2}};
  auto fine = ValidateOp(op, "prof", &reason);
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(reason, "");
  EXPECT_EQ(fine->layout, "ND");
}

TEST(OpListTest, OperatorsTooLargeToTuneHereAreUntuned) {
  auto list =
      ParseOpList(R"({"ops": [{"op_name": "huge", "op_type": "MatMul", "inputs": [[1048576, 1048576], [1048576, 2]]},
    {"op_name": "slow", "op_type": "Conv2D", "inputs": [[64, 512, 64, 64], [512, 512, 3, 3]], "attrs": {"padding": [1, 1]}},
    {"op_name": "ok", "op_type": "MatMul", "inputs": [[128, 768], [768, 3072]]}]})",
                  "ops.json");
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->ops.size(), 1u);
  EXPECT_EQ(list->ops[0].name, "ok");
  ASSERT_EQ(list->untuned.size(), 2u);
  EXPECT_EQ(list->untuned[0].reason.rfind("too large to tune here (1.1e+12 elements", 0), 0u)
      << list->untuned[0].reason;
  EXPECT_EQ(list->untuned[1].reason.rfind("too large to tune here", 0), 0u) << list->untuned[1].reason;
}

TEST(OpListTest, ErrorsNameTheFileAndField) {
  struct Case {
    const char* json;
    const char* message;
  } cases[] = {
      {"{",
       "f.json: not valid JSON (The JSON document has an improper structure: missing or superfluous commas, braces, "
       "missing keys, etc.)"},
      {"[]", "f.json: expected an object {\"name\": ..., \"ops\": [...]}"},
      {"{\"ops\": 3}", "f.json: ops: missing or not an array"},
      {"{\"ops\": [{\"inputs\": []}]}", "f.json: ops[0].op_type: missing or not a string"},
      {"{\"ops\": [{\"op_type\": \"MatMul\"}]}", "f.json: ops[0].inputs: missing or not an array of shapes"},
      {"{\"ops\": [{\"op_type\": \"MatMul\", \"inputs\": [[2, 3], [4, 5]]}]}",
       "f.json: ops[0].inputs: MatMul inner dimensions differ: A is [2,3], B is [4,5]"},
      {"{\"ops\": [{\"op_type\": \"MatMul\", \"inputs\": [[2, \"x\"], [3, 5]]}]}",
       "f.json: ops[0].inputs[0]: expected an array of integers"},
      {"{\"ops\": [{\"op_type\": \"MatMul\", \"inputs\": [[2, 3], [3, 5]], \"count\": 0}]}",
       "f.json: ops[0].count: expected an integer >= 1"},
      {"{\"ops\": [{\"op_type\": \"Conv2D\", \"inputs\": [[1, 8, 8, 8], [4, 8, 3, 3]], \"attrs\": {\"stride\": [1]}}]}",
       "f.json: ops[0].attrs.stride: expected 2 integers, got 1"},
      {"{\"ops\": [{\"op_type\": \"Conv2D\", \"inputs\": [[1, 8, 8, 8], [4, 8, 3, 3]], \"attrs\": {\"groups\": 3}}]}",
       "f.json: ops[0].attrs.groups: groups must divide the input and output channels"},
      {"{\"ops\": [{\"op_type\": \"Conv2D\", \"inputs\": [[1, 8, 2, 2], [4, 8, 3, 3]]}]}",
       "f.json: ops[0].inputs: the kernel is larger than the padded input"},
      {"{\"ops\": [{\"op_type\": \"MatMul\", \"inputs\": [[0, 3], [3, 5]]}]}",
       "f.json: ops[0].inputs[0]: dimensions must be between 1 and 1048576"},
      // Padding and stride are bounded like dimensions (no signed overflow in the output size).
      {"{\"ops\": [{\"op_type\": \"Conv2D\", \"inputs\": [[1, 8, 8, 8], [4, 8, 3, 3]], "
       "\"attrs\": {\"padding\": [4611686018427387904, 1]}}]}",
       "f.json: ops[0].attrs.padding: padding must be between 0 and 1048576"},
      {"{\"ops\": [{\"op_type\": \"Conv2D\", \"inputs\": [[1, 8, 8, 8], [4, 8, 3, 3]], "
       "\"attrs\": {\"padding\": [1048577, 0]}}]}",
       "f.json: ops[0].attrs.padding: padding must be between 0 and 1048576"},
      {"{\"ops\": [{\"op_type\": \"Conv2D\", \"inputs\": [[1, 8, 8, 8], [4, 8, 3, 3]], "
       "\"attrs\": {\"stride\": [1, 9223372036854775807]}}]}",
       "f.json: ops[0].attrs.stride: strides must be between 1 and 1048576"},
  };
  for (const auto& c : cases) {
    auto list = ParseOpList(c.json, "f.json");
    ASSERT_FALSE(list.ok()) << c.json;
    EXPECT_EQ(list.status().message(), c.message) << c.json;
  }
}

TEST(OpListTest, OpJsonRoundTrips) {
  OpDesc op;
  op.name = "conv \"x\"";
  op.type = "Conv2D";
  op.inputs = {{2, 6, 9, 9}, {4, 3, 3, 3}};
  op.stride[0] = 2;
  op.padding[1] = 1;
  op.groups = 2;
  op.bias = true;
  op.count = 3;
  std::string reason;
  auto back = ParseOpJson(OpToJson(op), "x", &reason);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(reason, "");
  op.layout = "NCHW";
  EXPECT_EQ(Signature(*back), Signature(op));
  EXPECT_EQ(back->name, op.name);
  EXPECT_EQ(back->count, 3);
}

}  // namespace
}  // namespace portkit::tune
