#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "analyse/custom_ops.h"
#include "analyse/target.h"

namespace portkit::analyse {
namespace {

TEST(Target, NpuListsPerVersionWithNearestFallback) {
  std::string warning;
  auto t21 = Target::Load(PORTKIT_TEST_DATA_DIR, "npu", "2.1.0", &warning);
  ASSERT_TRUE(t21.ok()) << t21.status().message();
  EXPECT_TRUE(warning.empty());
  EXPECT_EQ(t21->list_version(), "2.1");
  EXPECT_NE(t21->Unsupported("torch.cdist"), nullptr);
  EXPECT_NE(t21->Supported("torch.Tensor.cuda"), nullptr);
  auto t24 = Target::Load(PORTKIT_TEST_DATA_DIR, "npu", "2.4.1", &warning);
  ASSERT_TRUE(t24.ok());
  EXPECT_EQ(t24->list_version(), "2.6");
  EXPECT_EQ(warning, "no npu support list for torch 2.4.1; using the nearest, torch 2.6 (lists: 2.1, 2.6, 2.7, 2.8)");
  auto t28 = Target::Load(PORTKIT_TEST_DATA_DIR, "npu", "2.8.0", &warning);
  ASSERT_TRUE(t28.ok());
  EXPECT_EQ(t28->Unsupported("torch.cdist"), nullptr);  // supported from 2.7 on
}

TEST(Target, CpuSupportsEverythingButCuda) {
  auto cpu = Target::Load(PORTKIT_TEST_DATA_DIR, "cpu", "", nullptr);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_TRUE(cpu->all_supported());
  EXPECT_FALSE(cpu->cuda().api_prefixes.empty());
}

TEST(Target, ErrorsNameWhatIsWrong) {
  auto missing = Target::Load(PORTKIT_TEST_DATA_DIR, "tpu", "", nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message().rfind("unknown target 'tpu': no ", 0), 0u);
  auto bad_version = Target::Load(PORTKIT_TEST_DATA_DIR, "npu", "latest", nullptr);
  ASSERT_FALSE(bad_version.ok());
  EXPECT_EQ(bad_version.status().message(), "-v/--version 'latest' is not a torch version like 2.1.0");
  auto path = std::filesystem::temp_directory_path() / "portkit_bad.tsv";
  std::ofstream(path) << "# comment\ntorch.a\tnote\n\tno name\n";
  std::unordered_map<std::string, std::string> out;
  Status st = ReadTsv(path, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), path.string() + ":3:1: empty name");
  std::filesystem::remove(path);
}

TEST(CustomOps, PybindAndTorchLibraryRegistrationsWithArgumentCounts) {
  CppScan kernels = ScanCppSource(
      "at::Tensor nms_cuda(const at::Tensor& boxes, const at::Tensor& scores, double thr) {\n"
      "  return boxes;\n}\n", "k.cu");
  CppScan bindings = ScanCppSource(
      "#include <torch/extension.h>\n"
      "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
      "  m.def(\"nms_cuda\", &nms_cuda, \"NMS\");\n"
      "}\n"
      "TORCH_LIBRARY(myops, m) {\n"
      "  m.def(\"roi_align(Tensor input, Tensor rois, float scale, int out_h, int out_w) -> Tensor\");\n"
      "}\n"
      "TORCH_LIBRARY_IMPL(myops, CUDA, m) {\n"
      "  m.impl(\"roi_align\", &roi_align_cuda);\n"
      "}\n", "b.cpp");
  CustomOpTable table;
  std::vector<CppScan> scans;
  scans.push_back(std::move(kernels));
  scans.push_back(std::move(bindings));
  table.Link(std::move(scans));
  ASSERT_EQ(table.ops.size(), 2u);
  const CustomOp* nms = table.Match("nms_cuda", 3, false);
  ASSERT_NE(nms, nullptr);
  EXPECT_EQ(nms->file, "b.cpp");
  EXPECT_EQ(nms->line, 3u);
  EXPECT_EQ(nms->how, "PYBIND11_MODULE");
  EXPECT_EQ(table.Match("nms_cuda", 2, false), nullptr);  // wrong argument count
  const CustomOp* roi = table.Match("roi_align", 5, false);
  ASSERT_NE(roi, nullptr);
  EXPECT_EQ(roi->ns, "myops");
  EXPECT_EQ(roi->arg_count, 5);
}

TEST(CustomOps, CountParameters) {
  EXPECT_EQ(CountParameters(""), 0);
  EXPECT_EQ(CountParameters(" void "), 0);
  EXPECT_EQ(CountParameters("std::map<int, int> a, int b"), 2);
  EXPECT_EQ(CountParameters("Tensor a, Tensor[] b, int[2] c"), 3);
}

}  // namespace
}  // namespace portkit::analyse
