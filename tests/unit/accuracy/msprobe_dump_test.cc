// msprobe dumps as compare input: dump.json folders written here in msprobe's PyTorch layout
// (statistics mode, md5 mode, tensor mode with .pt names), compared with each other.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "accuracy/api.h"
#include "accuracy/msprobe_dump.h"
#include "accuracy/tensor_data_file.h"
#include "core/context.h"
#include "core/log.h"

namespace portkit::accuracy {
namespace {
namespace fs = std::filesystem;

std::string Tensor(const std::string& dtype, const std::string& shape, double max, double min, double mean, double norm,
                   const std::string& extra = "") {
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
  return R"({"task": ")" + task +
         R"(", "level": "L1", "framework": "pytorch", "dump_data_dir": null, "data": {)"
         R"("Functional.linear.0.forward": {"input_args": [)" +
         in +
         R"(, {"type": "int", "value": 3}], )"
         R"("input_kwargs": {"bias": null}, "output": [)" +
         lin +
         R"(]}, )"
         R"("Functional.relu.0.forward": {"input_args": [)" +
         lin + R"(], "input_kwargs": {}, "output": [)" + relu +
         R"(]}, )"
         R"("Tensor.softmax.0.forward": {"input_args": [)" +
         relu +
         R"(], "input_kwargs": {"dim": {"type": "int", "value": -1}}, )"
         R"("output": [)" +
         soft +
         R"(]}, )"
         R"("Functional.linear.0.backward": {"input": [)" +
         lin + R"(], "output": [)" + in + R"(, null]}}})";
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

TEST_F(MsprobeDump, Md5ModeChecksumsAndTensorModeWithoutDataFilesIsComparedByStatistics) {
  auto md5 = Dump::Load(Write("md5", DumpJson("statistics", 0, R"(, "md5": "0a1b2c3d")")));
  ASSERT_TRUE(md5.ok());
  EXPECT_EQ(md5->ops[0].tensors[0].crc32, 0x0a1b2c3d);
  fs::path dir = Write("tensor", DumpJson("tensor", 0, R"(, "data_name": "Functional.linear.0.forward.input.0.pt")"));
  auto tensor = Dump::Load(dir);
  ASSERT_TRUE(tensor.ok());
  EXPECT_EQ(tensor->warning, (dir / "dump.json").string() +
                                 ": msprobe tensor mode without a dump_tensor_data/ folder "
                                 "beside it: compared by the statistics in dump.json");
  EXPECT_TRUE(tensor->ops[0].file.empty());
  // With the folder, each operator's tensors are read from their files.
  fs::create_directories(dir / "dump_tensor_data");
  auto with_data = Dump::Load(dir);
  ASSERT_TRUE(with_data.ok());
  EXPECT_EQ(with_data->warning, "");
  EXPECT_EQ(with_data->ops[0].file, kTensorDataFolder);
  EXPECT_EQ(with_data->ops[0].tensors[0].data_name, "Functional.linear.0.forward.input.0.pt");
}

/// A .npy file (format 1.0) of float32 values.
void WriteNpy(const fs::path& file, const std::vector<float>& values) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(values.size()) + ",), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string bytes = "\x93NUMPY";
  bytes += std::string("\x01\x00", 2);
  bytes.push_back(static_cast<char>(header.size() & 0xFF)), bytes.push_back(static_cast<char>(header.size() >> 8));
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  std::ofstream(file, std::ios::binary) << bytes;
}

TEST_F(MsprobeDump, TensorModeIsComparedFromItsDataFilesAndAMissingOneIsAReadError) {
  const std::string json = R"({"task": "tensor", "level": "L1", "framework": "pytorch", "data": {)"
                           R"("Functional.relu.0.forward": {"input_args": [)" +
                           Tensor("torch.float32", "[4]", 2, -2, 0, 3, R"(, "data_name": "in.npy")") +
                           R"(], "input_kwargs": {}, "output": [)" +
                           Tensor("torch.float32", "[4]", 2, 0, 1, 3, R"(, "data_name": "out.npy")") + R"(]}}})";
  fs::path ref = Write("ref", json), tgt = Write("tgt", json);
  for (const fs::path& d : {ref, tgt}) fs::create_directories(d / "dump_tensor_data");
  WriteNpy(ref / "dump_tensor_data" / "in.npy", {-2, -1, 1, 2});
  WriteNpy(tgt / "dump_tensor_data" / "in.npy", {-2, -1, 1, 2});
  WriteNpy(ref / "dump_tensor_data" / "out.npy", {0, 0, 1, 2});
  WriteNpy(tgt / "dump_tensor_data" / "out.npy", {0, 0, 1, 2.5f});
  CompareOptions o;
  o.reference = ref, o.target = tgt;
  auto report = RunCompare(o, ctx_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 2u);
  EXPECT_TRUE(report->warnings.empty());
  for (const auto& row : report->rows) {
    EXPECT_TRUE(row.compared) << row.target.name;
    EXPECT_FALSE(row.from_statistics) << row.target.name;
  }
  EXPECT_EQ(report->rows[0].verdict, Verdict::kYes);
  EXPECT_EQ(report->rows[0].metrics.at("MaxAbsErr"), 0);
  EXPECT_EQ(report->rows[1].metrics.at("MaxAbsErr"), 0.5);  // the data, not dump.json's equal statistics
  EXPECT_EQ(report->rows[1].target.stats->max, 2.5);
  EXPECT_TRUE(report->read_errors.empty());
  // The target's output file is gone: that pair is a read error naming it, the input still compared.
  fs::remove(tgt / "dump_tensor_data" / "out.npy");
  auto missing = RunCompare(o, ctx_);
  ASSERT_TRUE(missing.ok()) << missing.status().message();
  ASSERT_EQ(missing->read_errors.size(), 1u);
  EXPECT_NE(missing->read_errors[0].second.find((tgt / "dump_tensor_data" / "out.npy").string()), std::string::npos)
      << missing->read_errors[0].second;
  EXPECT_TRUE(missing->rows[0].compared);
}

TEST_F(MsprobeDump, ADataFileContradictingDumpJsonsDtypeIsNamedNotASilentNA) {
  const std::string json = R"({"task": "tensor", "level": "L1", "framework": "pytorch", "data": {)"
                           R"("Functional.relu.0.forward": {"input_args": [)" +
                           Tensor("torch.float32", "[4]", 2, -2, 0, 3, R"(, "data_name": "in.npy")") +
                           R"(], "input_kwargs": {}, "output": [)" +
                           Tensor("torch.float32", "[4]", 2, 0, 1, 3, R"(, "data_name": "out.npy")") + R"(]}}})";
  fs::path ref = Write("ref", json), tgt = Write("tgt", json);
  for (const fs::path& d : {ref, tgt}) fs::create_directories(d / "dump_tensor_data");
  WriteNpy(ref / "dump_tensor_data" / "in.npy", {-2, -1, 1, 2});
  WriteNpy(ref / "dump_tensor_data" / "out.npy", {0, 0, 1, 2});
  WriteNpy(tgt / "dump_tensor_data" / "out.npy", {0, 0, 1, 2});
  // The target's input: complex64 where dump.json says float32.
  std::string header = "{'descr': '<c8', 'fortran_order': False, 'shape': (4,), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes.push_back(static_cast<char>(header.size())), bytes.push_back(0);
  std::ofstream(tgt / "dump_tensor_data" / "in.npy", std::ios::binary) << bytes + header + std::string(32, '\0');
  CompareOptions o;
  o.reference = ref, o.target = tgt;
  auto report = RunCompare(o, ctx_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 2u);
  const std::string note =
      (tgt / "dump_tensor_data" / "in.npy").string() + ": holds descr '<c8' data, dump.json says F32; not compared";
  EXPECT_EQ(report->rows[0].verdict, Verdict::kNotApplicable);
  EXPECT_EQ(report->rows[0].message, note);
  ASSERT_EQ(report->warnings.size(), 1u);
  EXPECT_EQ(report->warnings[0], note);
  EXPECT_EQ(report->rows[1].verdict, Verdict::kYes);
}

TEST_F(MsprobeDump, AnEmptyDumpIsAnErrorOnEitherSide) {
  CompareOptions o;
  o.reference = Write("ref", DumpJson("statistics", 0));
  o.target = Write("empty", R"({"task": "statistics", "level": "L1", "data": {}})");
  auto r = RunCompare(o, ctx_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kParse);
  EXPECT_EQ(r.status().message(), o.target.string() +
                                      ": the target dump has no operators (dump.json's \"data\" "
                                      "holds no API or module call); nothing to compare");
  std::swap(o.reference, o.target);
  auto r2 = RunCompare(o, ctx_);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("the reference dump has no operators"), std::string::npos);
}

TEST_F(MsprobeDump, DumpJsonIsReadAsAStreamOneCallAtATime) {
  // Members in any order around "data" ("task" after it), nested strings holding brackets, a call
  // name written with an escape, entries that are no call, a value that is no object.
  fs::path d = Write("order", R"({"level": "L1", "dump_data_dir": {"x": ["]", "}", "\"{"]}, "data": {)"
                              R"("Functional.re\u006cu.0.forward": {"output": [)" +
                                  Tensor("torch.float32", "[2]", 1, 0, 0.5, 1) +
                                  R"(]}, "odd name": {}, "Tensor.add.0.forward": 3, "Tensor.mul.0.forward": {}}, )"
                                  R"("task": "statistics"}  )"
                                  "\n");
  auto dump = LoadMsprobeDump(d);
  ASSERT_TRUE(dump.ok()) << dump.status().message();
  ASSERT_EQ(dump->ops.size(), 2u);
  EXPECT_EQ(dump->ops[0].call, "Functional.relu.0.forward");
  EXPECT_EQ(dump->ops[0].tensors.size(), 1u);
  EXPECT_EQ(dump->ops[1].call, "Tensor.mul.0.forward");
  EXPECT_EQ(dump->ops[1].index, 2);  // the call that was no object still took its index
  EXPECT_EQ(dump->warning,
            (d / "dump.json").string() + ": 1 entries with no API.N.phase name skipped (first: odd name)");
  const std::string file = (Write("x", "{}") / "dump.json").string();
  auto error = [&](const std::string& json, uint64_t cap = kDefaultMaxCallBytes) {
    auto r = LoadMsprobeDump(Write("x", json), cap);
    return r.ok() ? std::string("(loaded)") : r.status().message();
  };
  EXPECT_EQ(error(R"({"task": "statistics", "data": {"Functional.relu.0.forward": {"input_args": [)"),
            file + ": not valid JSON: ends inside a value at byte 61 (the file ends at byte 77: truncated?)");
  EXPECT_EQ(error(R"({"data": {"Functional.relu.0.forward": {}}} garbage)"),
            file + ": not valid JSON: text after the end of the document at byte 44");
  EXPECT_EQ(error(R"({"data": {"Functional.relu.0.forward": {"a": [}]}}})"),
            file + ": not valid JSON: a stray '}' at byte 46");
  EXPECT_EQ(error(R"({"data": {"Functional.relu.0.forward": {"a": tru}}})")
                .find(file + ": not valid JSON: the call at byte 10 ("),
            0u);
  EXPECT_EQ(error(R"({"data": []})"), file + ": no \"data\" object; not an msprobe dump.json");
  EXPECT_EQ(error(R"([1, 2])"), file + ": not valid JSON: not an object; not an msprobe dump.json");
  EXPECT_EQ(error(R"({"data": {}})"), "(loaded)");
  // One call over the cap: over the limit, naming the flag; the default reads it.
  const std::string big =
      R"({"data": {"Functional.relu.0.forward": {"input_args": [)" + std::string(3000, ' ') + "]}}}";
  EXPECT_EQ(error(big, 1024), file +
                                  ": over the limit: the call at byte 10 is larger than 1024 bytes of JSON; not read. "
                                  "--max-call-mb raises the limit");
  EXPECT_EQ(error(big), "(loaded)");
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
