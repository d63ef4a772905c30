#include <gtest/gtest.h>

#include <algorithm>
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

TEST(Target, DataOnlyTargetByPath) {
  std::string warning;
  auto xpu = Target::Load(PORTKIT_TEST_DATA_DIR, std::string(PORTKIT_TEST_DATA_DIR) + "/../tests/fixtures/targets/xpu",
                          "2.1.0", &warning);
  ASSERT_TRUE(xpu.ok()) << xpu.status().message();
  EXPECT_EQ(xpu->name(), "xpu");
  EXPECT_EQ(xpu->list_version(), "2.5");
  EXPECT_EQ(warning, "no xpu support list for torch 2.1.0; using the nearest, torch 2.5 (lists: 2.5)");
  EXPECT_NE(xpu->Unsupported("torch.cdist"), nullptr);
  EXPECT_EQ(xpu->RewriteByPrefix("torch.cuda.synchronize"), "torch.xpu.synchronize");
  EXPECT_EQ(xpu->facts().device_type, "xpu");
  EXPECT_EQ(xpu->advice().global.size(), 1u);
}

TEST(Target, DefaultIsNpu) {
  auto t = Target::Load(PORTKIT_TEST_DATA_DIR, "", "", nullptr);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->name(), "npu");
  EXPECT_EQ(t->RewriteByPrefix("torch.profiler.ProfilerActivity.CUDA"), "torch_npu.profiler.ProfilerActivity.NPU");
}

TEST(Target, CudaLibrariesKeepWhatPortsKeep) {
  auto t = Target::Load(PORTKIT_TEST_DATA_DIR, "", "", nullptr);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto& libs = t->cuda_libraries();
  auto find = [&](const std::string& name) {
    return std::find_if(libs.begin(), libs.end(), [&](const auto& c) { return c.name == name; });
  };
  auto syncbn = find("apex.parallel.convert_syncbn_model");
  ASSERT_NE(syncbn, libs.end());
  EXPECT_EQ(syncbn->plain, "torch.nn.SyncBatchNorm.convert_sync_batchnorm");
  EXPECT_EQ(syncbn->unsure_keywords, std::vector<std::string>{"channel_last"});
  EXPECT_NE(syncbn->kept.find("33 of 33"), std::string::npos);
  // A row with an empty fourth column is ported.
  auto layer_norm = find("apex.normalization.FusedLayerNorm");
  ASSERT_NE(layer_norm, libs.end());
  EXPECT_TRUE(layer_norm->kept.empty());
  EXPECT_TRUE(layer_norm->unsure_keywords.empty());
}

TEST(Target, ErrorsNameWhatIsWrong) {
  auto missing = Target::Load(PORTKIT_TEST_DATA_DIR, "tpu", "", nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "unknown target 'tpu'; available targets: cpu, npu (or the path of a folder holding a target.json)");
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

CallShape Positional(size_t n) {
  CallShape c;
  c.positional = n;
  return c;
}

// A comma inside a parameter comment is no separator (real case: apex's kernels document their
// layouts as `/* rows, cols */`), and a commented-out registration registers nothing.
TEST(CustomOps, CommentsDoNotCountAsParametersOrRegistrations) {
  CppScan kernels = ScanCppSource(
      "at::Tensor fused(const at::Tensor& x /* rows, cols */, // input, row-major\n"
      "                 double eps /* default 1e-5, see doc */) {\n  return x;\n}\n",
      "k.cu");
  ASSERT_EQ(kernels.functions.count("fused"), 1u);
  EXPECT_EQ(kernels.functions.find("fused")->second, 2);
  CppScan bindings = ScanCppSource(
      "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
      "  m.def(\"fused\", &fused, \"fused op, with a comma\");\n"
      "  // m.def(\"old_fused\", &old_fused);\n"
      "  /* m.def(\"older\", &older); */\n"
      "}\n",
      "b.cpp");
  CustomOpTable table;
  std::vector<CppScan> scans;
  scans.push_back(std::move(kernels));
  scans.push_back(std::move(bindings));
  table.Link(std::move(scans));
  ASSERT_EQ(table.ops.size(), 1u);
  EXPECT_EQ(table.ops[0].name, "fused");
  EXPECT_EQ(table.ops[0].arg_count, 2);
}

TEST(CustomOps, PybindAndTorchLibraryRegistrationsWithArgumentCounts) {
  CppScan kernels = ScanCppSource(
      "at::Tensor nms_cuda(const at::Tensor& boxes, const at::Tensor& scores, double thr) {\n"
      "  return boxes;\n}\n",
      "k.cu");
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
      "}\n",
      "b.cpp");
  CustomOpTable table;
  std::vector<CppScan> scans;
  scans.push_back(std::move(kernels));
  scans.push_back(std::move(bindings));
  table.Link(std::move(scans));
  ASSERT_EQ(table.ops.size(), 2u);
  const CustomOp* nms = table.Match("nms_cuda", Positional(3));
  ASSERT_NE(nms, nullptr);
  EXPECT_EQ(nms->file, "b.cpp");
  EXPECT_EQ(nms->line, 3u);
  EXPECT_EQ(nms->how, "PYBIND11_MODULE");
  EXPECT_EQ(table.Match("nms_cuda", Positional(2)), nullptr);  // wrong argument count
  const CustomOp* roi = table.Match("roi_align", Positional(5));
  ASSERT_NE(roi, nullptr);
  EXPECT_EQ(roi->ns, "myops");
  EXPECT_EQ(roi->arg_count, 5);
}

CallShape Call(size_t positional, std::vector<std::string_view> keywords, bool star = false, bool double_star = false) {
  CallShape c;
  c.positional = positional;
  c.keywords = std::move(keywords);
  c.star = star;
  c.double_star = double_star;
  return c;
}

CustomOpTable TableOf(std::vector<std::pair<std::string, std::string>> sources) {
  std::vector<CppScan> scans;
  for (auto& [path, text] : sources) scans.push_back(ScanCppSource(text, path));
  CustomOpTable table;
  table.Link(std::move(scans));
  return table;
}

TEST(CustomOps, PyArgDefaultsAndKeywordNames) {
  CustomOpTable t = TableOf({{"b.cu",
                              "PYBIND11_MODULE(ext, m) {\n"
                              "  m.def(\"ball_query\", &ball_query, \"doc, with a comma\", py::arg(\"xyz\"),\n"
                              "        py::arg(\"new_xyz\"), py::arg(\"radius\"), py::arg(\"nsample\") = 16);\n"
                              "  m.def(\"voxelize\", [](at::Tensor p, at::Tensor v) { return p; });\n"
                              "}\n"}});
  ASSERT_EQ(t.ops.size(), 2u);
  const CustomOp* bq = t.Match("ball_query", Call(3, {}));
  ASSERT_NE(bq, nullptr);  // nsample defaults
  EXPECT_EQ(bq->min_args, 3);
  EXPECT_EQ(bq->arg_count, 4);
  EXPECT_EQ(bq->arg_names, (std::vector<std::string>{"xyz", "new_xyz", "radius", "nsample"}));
  EXPECT_NE(t.Match("ball_query", Call(2, {"radius", "nsample"})), nullptr);  // keywords count
  EXPECT_EQ(t.Match("ball_query", Call(2, {"r"})), nullptr);                  // no such parameter
  EXPECT_EQ(t.Match("ball_query", Call(2, {"xyz", "radius"})), nullptr);      // xyz given twice
  EXPECT_EQ(t.Match("ball_query", Call(2, {})), nullptr);                     // too few
  EXPECT_EQ(t.Match("ball_query", Call(5, {})), nullptr);                     // too many
  EXPECT_NE(t.Match("ball_query", Call(2, {}, false, true)), nullptr);        // **kw can name them
  EXPECT_NE(t.Match("voxelize", Call(2, {})), nullptr);                       // lambda parameters
  EXPECT_EQ(t.Match("voxelize", Call(1, {})), nullptr);
}

TEST(CustomOps, SplatsMatchOnlyWhereTheArityCanFit) {
  CustomOpTable t =
      TableOf({{"k.cu", "int chamfer_forward(at::Tensor a, at::Tensor b, at::Tensor c, at::Tensor d) {\n}\n"},
               {"b.cpp", "PYBIND11_MODULE(ext, m) {\n  m.def(\"forward\", &chamfer_forward, \"fwd\");\n}\n"}});
  EXPECT_NE(t.Match("forward", Call(4, {})), nullptr);
  EXPECT_NE(t.Match("forward", Call(0, {}, true, true)), nullptr);   // *a can supply four
  EXPECT_EQ(t.Match("forward", Call(0, {}, false, true)), nullptr);  // **kw: positional-only op
  EXPECT_EQ(t.Match("forward", Call(5, {}, true)), nullptr);         // already too many
}

TEST(CustomOps, TorchLibrarySchemaDefaultsAndCpuOnlyOps) {
  CustomOpTable t = TableOf({{"ops.cu",
                              "TORCH_LIBRARY(dev, m) {\n  m.def(\"scale(Tensor x, float s=1.0) -> Tensor\");\n}\n"
                              "TORCH_LIBRARY_IMPL(dev, CUDA, m) {\n  m.impl(\"scale\", &scale_cuda);\n}\n"},
                             {"host.cpp",
                              "TORCH_LIBRARY(host, m) {\n  m.def(\"host_sort(Tensor x) -> Tensor\");\n}\n"
                              "TORCH_LIBRARY_IMPL(host, CPU, m) {\n  m.impl(\"host_sort\", &host_sort);\n}\n"}});
  EXPECT_NE(t.Match("scale", Call(1, {})), nullptr);
  EXPECT_NE(t.Match("scale", Call(1, {"s"})), nullptr);
  EXPECT_EQ(t.Match("scale", Call(1, {"t"})), nullptr);
  EXPECT_EQ(t.Match("host_sort", Call(1, {})), nullptr);  // CPU kernels only
  ASSERT_FALSE(t.cpu_ops.empty());
  EXPECT_EQ(t.cpu_ops.front().name, "host_sort");
  // A project whose C++ never mentions CUDA has no CUDA operators.
  CustomOpTable cpu = TableOf({{"b.cpp", "PYBIND11_MODULE(ext, m) {\n  m.def(\"f\", &f);\n}\n"}});
  EXPECT_TRUE(cpu.ops.empty());
  EXPECT_EQ(cpu.cpu_ops.size(), 1u);
}

// apex registers `forward` in a dozen extension modules with different arities: each is its own
// op, and the module a call goes through picks among them.
TEST(CustomOps, EveryModuleKeepsItsOwnRegistration) {
  std::vector<CppScan> scans;
  scans.push_back(
      ScanCppSource("at::Tensor fwd_a(at::Tensor x, at::Tensor y, at::Tensor z) { return x; }\n"
                    "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"forward\", &fwd_a, \"a (CUDA)\"); }\n",
                    "csrc/a/a.cpp"));
  scans.push_back(
      ScanCppSource("at::Tensor fwd_b(at::Tensor x, at::Tensor y, double s, bool h) { return x; }\n"
                    "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"forward\", &fwd_b, \"b (CUDA)\"); }\n",
                    "csrc/b/b.cpp"));
  scans.push_back(ScanCppSource("__global__ void k() {}\n", "csrc/a/k.cu"));
  std::vector<ExtensionBuild> builds = ScanExtensionBuilds(
      "ext = [CUDAExtension(name='pkg.a_cuda', sources=['csrc/a/a.cpp', 'csrc/a/k.cu']),\n"
      "       CUDAExtension('b_cuda', sources=[os.path.join('csrc', 'b/b.cpp')])]\n");
  ASSERT_EQ(builds.size(), 2u);
  EXPECT_EQ(builds[0].module, "a_cuda");
  EXPECT_EQ(builds[0].kind, ExtensionBuild::Kind::kCuda);
  EXPECT_EQ(builds[0].sources, (std::vector<std::string>{"csrc/a/a.cpp", "csrc/a/k.cu"}));
  EXPECT_EQ(builds[1].module, "b_cuda");
  CustomOpTable t;
  t.Link(std::move(scans), builds);
  ASSERT_EQ(t.ops.size(), 2u);
  const CustomOp* b = t.Match("forward", Call(4, {}), "b_cuda");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->file, "csrc/b/b.cpp");
  EXPECT_EQ(b->modules, (std::vector<std::string>{"b_cuda"}));
  EXPECT_EQ(t.Match("forward", Call(3, {}), "b_cuda"), nullptr);  // a_cuda's arity, b_cuda's call
  EXPECT_NE(t.Match("forward", Call(3, {}), "a_cuda"), nullptr);
  EXPECT_EQ(t.Match("forward", Call(3, {}), "numpy"), nullptr);  // every forward belongs elsewhere
  EXPECT_NE(t.Match("forward", Call(4, {})), nullptr);           // receiver unknown: any that fits
}

// DeepSpeed's cpu_adam and libaio bindings live in a project with .cu files: a binding that
// mentions no CUDA, whose functions (or class members) are defined in sources that mention none,
// is a CPU extension; a CppExtension build says so outright, a CUDAExtension build the opposite.
TEST(CustomOps, CpuExtensionsInAProjectWithCudaSources) {
  auto table = [](std::vector<ExtensionBuild> builds) {
    std::vector<CppScan> scans;
    scans.push_back(
        ScanCppSource("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
                      "  m.def(\"adam_update\", &adam_update);\n"
                      "  py::class_<io_handle_t>(m, \"aio_handle\").def(\"wait\", &io_handle_t::wait);\n"
                      "  m.def(\"fused\", &fused);\n"
                      "}\n",
                      "csrc/adam/cpu_adam.cpp"));
    scans.push_back(
        ScanCppSource("void adam_update(at::Tensor p, double lr) {\n}\n"
                      "int io_handle_t::wait() { return 0; }\n",
                      "csrc/adam/cpu_adam_impl.cpp"));
    scans.push_back(ScanCppSource("// CUDA kernels\nvoid fused(at::Tensor p) {\n  cudaStream_t s;\n}\n",
                                  "csrc/adam/multi_tensor_adam.cu"));
    CustomOpTable t;
    t.Link(std::move(scans), builds);
    return t;
  };
  CustomOpTable t = table({});
  EXPECT_EQ(t.Match("adam_update", Call(2, {})), nullptr);
  EXPECT_EQ(t.Match("aio_handle", Call(1, {})), nullptr);
  EXPECT_NE(t.Match("fused", Call(1, {})), nullptr);  // defined in a .cu file
  EXPECT_EQ(t.cpu_ops.size(), 2u);
  ExtensionBuild cuda;
  cuda.kind = ExtensionBuild::Kind::kCuda;
  cuda.module = "adam_ext";
  cuda.sources = {"csrc/adam/cpu_adam.cpp"};
  CustomOpTable built = table({cuda});
  EXPECT_NE(built.Match("adam_update", Call(2, {}), "adam_ext"), nullptr);
  ExtensionBuild cpu = cuda;
  cpu.kind = ExtensionBuild::Kind::kCpu;
  cpu.sources = {"adam/cpu_adam.cpp"};  // a suffix of the path names the file
  EXPECT_EQ(table({cpu}).Match("fused", Call(1, {})), nullptr);
}

TEST(CustomOps, PythonMethodsTakeCallsOnUnknownReceivers) {
  CustomOpTable t;
  t.python_methods.emplace("retake_workspace", std::make_pair(0, 0));
  t.python_methods.emplace("layer_norm", std::make_pair(4, 4));
  EXPECT_TRUE(t.PythonMethodFits("retake_workspace", Call(0, {})));
  EXPECT_FALSE(t.PythonMethodFits("layer_norm", Call(5, {})));  // the extension's 5-argument op
  EXPECT_TRUE(t.PythonMethodFits("layer_norm", Call(3, {"eps"})));
  EXPECT_FALSE(t.PythonMethodFits("token_sort_", Call(2, {})));
}

TEST(CustomOps, ExtensionBuildsFromScriptText) {
  auto builds = ScanExtensionBuilds(
      "CppExtension(\"apex_C\", [\"csrc/flatten_unflatten.cpp\"])\n"
      "mod = load(name=\"fused_ext\", sources=[\"k.cu\", 'b.cpp'], verbose=True)\n"
      "x = load(path)\n"
      "Extension(name=f\"{n}_cuda\", sources=glob('*.cu'))\n");
  ASSERT_EQ(builds.size(), 2u);
  EXPECT_EQ(builds[0].kind, ExtensionBuild::Kind::kCpu);
  EXPECT_EQ(builds[0].module, "apex_C");
  EXPECT_EQ(builds[1].module, "fused_ext");
  EXPECT_EQ(builds[1].sources.size(), 2u);
  EXPECT_TRUE(ScanExtensionBuilds("import torch\n").empty());
}

TEST(CustomOps, CountParameters) {
  EXPECT_EQ(CountParameters(""), 0);
  EXPECT_EQ(CountParameters(" void "), 0);
  EXPECT_EQ(CountParameters("std::map<int, int> a, int b"), 2);
  EXPECT_EQ(CountParameters("Tensor a, Tensor[] b, int[2] c"), 3);
}

}  // namespace
}  // namespace portkit::analyse

#include "analyse/third_party.h"

namespace portkit::analyse {
namespace {

Finding Offending(const std::string& function, const std::string& api, uint32_t line) {
  Finding f;
  f.file = "lib/m.py";
  f.start_line = f.end_line = line;
  f.op = api;
  f.category = Category::kUnsupported;
  f.rule = "api_support";
  f.function = function;
  return f;
}

TEST(ThirdParty, RecursionCyclesPropagateWithWitnessPaths) {
  // entry -> a <-> b (a cycle) -> leaf (unsupported); lone -> nothing.
  std::vector<DefinitionRecord> defs = {{"m.entry", "lib/m.py", 1, {}},
                                        {"m.a", "lib/m.py", 2, {}},
                                        {"m.b", "lib/m.py", 3, {}},
                                        {"m.leaf", "lib/m.py", 4, {}},
                                        {"m.lone", "lib/m.py", 5, {}}};
  std::vector<CallRecord> calls = {{"m.entry", "m.a", "", "lib/m.py", 1, 1},
                                   {"m.a", "m.b", "", "lib/m.py", 2, 2},
                                   {"m.b", "m.a", "", "lib/m.py", 3, 3},
                                   {"m.b", "m.leaf", "", "lib/m.py", 3, 3}};
  std::vector<Finding> findings = {Offending("m.leaf", "torch.cdist", 4)};
  std::multimap<std::string, std::string> spellings = {{"m.entry", "pkg.entry"}};
  auto affected = PropagateAffected(defs, calls, findings, spellings);
  ASSERT_EQ(affected.size(), 4u);
  EXPECT_EQ(affected[0].qualname, "m.a");
  EXPECT_EQ(affected[1].qualname, "m.b");
  EXPECT_EQ(affected[2].qualname, "m.entry");
  EXPECT_EQ(affected[3].qualname, "m.leaf");
  EXPECT_EQ(affected[2].path, (std::vector<std::string>{"m.entry", "m.a", "m.b", "m.leaf"}));
  EXPECT_EQ(affected[2].spellings, (std::vector<std::string>{"m.entry", "pkg.entry"}));
  ASSERT_EQ(affected[0].offences.size(), 1u);
  EXPECT_EQ(affected[0].offences[0].api, "torch.cdist");
  EXPECT_EQ(affected[0].offences[0].line, 4u);
  ASSERT_EQ(affected[2].apis.size(), 1u);
  EXPECT_EQ(affected[2].apis[0], std::make_pair(Bucket::kFrameworkUnsupported, std::string("torch.cdist")));
}

TEST(ThirdParty, ApiFilesErrorsNameFileAndLine) {
  auto path = std::filesystem::temp_directory_path() / "portkit_api.csv";
  std::ofstream(path) << "File,3rd-party API,Message\nlib/m.py,mylib.nms,\"unterminated\n";
  auto apis = ThirdPartyApis::Load({path.string()});
  ASSERT_FALSE(apis.ok());
  EXPECT_EQ(apis.status().message(), path.string() + ":2: unterminated quoted field");
  std::ofstream(path) << "File,Api\nx,y\n";
  auto wrong = ThirdPartyApis::Load({path.string()});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find(":1: no '3rd-party API' column"), std::string::npos);
  std::ofstream(path) << "File,3rd-party API,Message\nlib/m.py,mylib.nms,\"a\nb\"\n";
  auto good = ThirdPartyApis::Load({path.string()});
  ASSERT_TRUE(good.ok()) << good.status().message();
  ASSERT_NE(good->Evidence("mylib.nms"), nullptr);
  EXPECT_EQ(*good->Evidence("mylib.nms"), "defined in lib/m.py\na\nb");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace portkit::analyse
