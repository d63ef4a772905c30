#include "target/target_facts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace portkit::target {
namespace {
namespace fs = std::filesystem;

const fs::path kData = PORTKIT_TEST_DATA_DIR;
const fs::path kXpu = kData / ".." / "tests" / "fixtures" / "targets" / "xpu";

// A scratch folder holding one target.json with `text`.
class BadTarget : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_target_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string ErrorOf(const std::string& text) {
    std::ofstream(dir_ / "target.json") << text;
    auto t = LoadTargetFacts(dir_);
    return t.ok() ? "ok" : t.status().message();
  }
  std::string file() const { return (dir_ / "target.json").string(); }
  fs::path dir_;
};

TEST(TargetFacts, NpuFactsComeFromData) {
  auto npu = LoadTarget(kData, "npu");
  ASSERT_TRUE(npu.ok()) << npu.status().message();
  EXPECT_TRUE(npu->is_default);
  EXPECT_EQ(npu->device_type, "npu");
  EXPECT_EQ(npu->python_module, "torch_npu");
  EXPECT_EQ(npu->import_line, "import torch_npu");
  EXPECT_EQ(npu->device_module, "torch_npu.npu");
  // Code migrate writes spells the device module as Ascend's ports do; whole components only.
  EXPECT_EQ(npu->device_module_alias, "torch.npu");
  EXPECT_EQ(npu->SpellInCode("torch_npu.npu.set_device"), "torch.npu.set_device");
  EXPECT_EQ(npu->SpellInCode("torch_npu.npu.amp.autocast"), "torch.npu.amp.autocast");
  EXPECT_EQ(npu->SpellInCode("torch_npu.npu"), "torch.npu");
  EXPECT_EQ(npu->SpellInCode("torch_npu.npux.f"), "torch_npu.npux.f");
  EXPECT_EQ(npu->SpellInCode("torch_npu.profiler.profile"), "torch_npu.profiler.profile");
  EXPECT_EQ(npu->renames.methods.at("cuda"), "npu");
  EXPECT_EQ(npu->renames.attributes.at("is_cuda"), "is_npu");
  EXPECT_EQ(npu->renames.distributed_backends.at("nccl"), "hccl");
  EXPECT_EQ(npu->renames.env_vars.at("CUDA_VISIBLE_DEVICES"), "ASCEND_RT_VISIBLE_DEVICES");
  ASSERT_NE(npu->FusedApi("rms_norm"), nullptr);
  EXPECT_EQ(*npu->FusedApi("rms_norm"), "torch_npu.npu_rms_norm");
  EXPECT_NE(npu->fp64.find("float64"), std::string::npos);  // the NPU has no fast fp64
  EXPECT_EQ(npu->fused_optimizers.at("torch.optim.AdamW"), "torch_npu.optim.NpuFusedAdamW");
  // torchvision's CUDA-backed ops: replaced through the Torchvision Adapter, except ps_roi_*.
  EXPECT_NE(npu->library_ops.count("torchvision.ops.nms"), 0u);
  EXPECT_EQ(npu->library_ops.count("torchvision.ops.ps_roi_align"), 0u);
  EXPECT_EQ(npu->profile.communication_kernels, (std::vector<std::string>{"hccl", "HCCL", "Hccl", "hcom_"}));
  // Mish is not a native activation on the NPU: the advisor's non_native_ops rule reads this.
  EXPECT_EQ(npu->profile.native_activations, (std::vector<std::string>{"Relu", "LeakyRelu", "PRelu", "Elu", "SRelu"}));
  // Mish first (profile.non_native_ops), then every activation of profile.native_ops that
  // native_activations does not list, by name, with its replacement and accuracy note.
  std::vector<std::string> non_native;
  for (const auto& op : npu->profile.non_native_ops) non_native.push_back(op.name);
  EXPECT_EQ(non_native, (std::vector<std::string>{"Mish", "CELU", "GELU", "Hardsigmoid", "Hardswish", "SELU", "SiLU"}));
  const auto& silu = npu->profile.non_native_ops.back();
  EXPECT_EQ(silu.ops, (std::vector<std::string>{"aten::silu", "aten::silu_", "aten::silu_backward"}));
  EXPECT_EQ(silu.replacement.rfind("torch_npu.contrib.module.SiLU", 0), 0u);
  EXPECT_NE(silu.caveat.find("accuracy"), std::string::npos);
  EXPECT_EQ(silu.why, "not a native activation on the target (native: Relu, LeakyRelu, PRelu, Elu, SRelu)");
  const auto& mish = npu->profile.non_native_ops[0];
  EXPECT_EQ(mish.name, "Mish");
  EXPECT_NE(std::find(mish.ops.begin(), mish.ops.end(), "aten::mish_backward"), mish.ops.end());
  EXPECT_EQ(mish.decomposed, "softplus-tanh-mul");
  EXPECT_EQ(mish.replacement.rfind("torch.nn.LeakyReLU", 0), 0u);
  EXPECT_NE(mish.caveat.find("accuracy"), std::string::npos);
  EXPECT_EQ(npu->DeviceMethods(), std::vector<std::string>{"npu"});
  EXPECT_TRUE(npu->migratable());
  auto cpu = LoadTarget(kData, "cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_FALSE(cpu->migratable());
  EXPECT_EQ(cpu->FusedApi("rms_norm"), nullptr);
  EXPECT_TRUE(cpu->fp64.empty());  // float64 is native on the CPU
}

TEST(TargetFacts, ChoicesAreTheFoldersWithATargetJson) {
  EXPECT_EQ(ListTargets(kData), (std::vector<std::string>{"cpu", "npu"}));
  EXPECT_EQ(MigrateTargets(kData), std::vector<std::string>{"npu"});
  EXPECT_EQ(*DefaultTargetName(kData), "npu");
  auto def = LoadTarget(kData, "");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->name, "npu");
  EXPECT_EQ(TargetOptionHelp(kData, false),
            "target platform: cpu, npu (default npu), or the path of a folder holding a target.json");
}

TEST(TargetFacts, UnknownTargetListsTheAvailableOnes) {
  EXPECT_EQ(CheckTargetChoice(kData, "tpu", false),
            "unknown target 'tpu'; available targets: cpu, npu (or the path of a folder holding a target.json)");
  EXPECT_EQ(CheckTargetChoice(kData, "cpu", true),
            "target 'cpu' is not an accelerator (\"kind\": \"cpu\"), so there is nothing to migrate to; targets for "
            "migrate: npu");
  EXPECT_EQ(CheckTargetChoice(kData, "/nonexistent/xpu", false),
            "target folder /nonexistent/xpu has no target.json (available targets: cpu, npu)");
  EXPECT_EQ(CheckTargetChoice(kData, "npu", true), "");
  EXPECT_EQ(CheckTargetChoice(kData, kXpu.string(), true), "");
}

TEST(TargetFacts, DataOnlyTargetByPath) {
  auto xpu = LoadTarget(kData, kXpu.string());
  ASSERT_TRUE(xpu.ok()) << xpu.status().message();
  EXPECT_EQ(xpu->name, "xpu");
  EXPECT_FALSE(xpu->is_default);
  EXPECT_EQ(xpu->import_line, "import torch_xpu");
  EXPECT_EQ(xpu->renames.distributed_backends.at("nccl"), "xccl");
  EXPECT_EQ(xpu->profile.fusion_apis.at("RMSNorm"), "torch_xpu.fused_rms_norm");
  EXPECT_EQ(xpu->FusedApi("swiglu"), nullptr);
}

TEST_F(BadTarget, ErrorsNameTheFileAndWhatIsWrong) {
  const std::string ok = R"("kind": "accelerator", "device_type": "t", )";
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", \"devce_type\": \"t\"}"),
            file() +
                ": unknown key \"devce_type\" (known: name, description, kind, default, versions, device_type, "
                "python_module, import_line, device_module, device_module_alias, transfer_import, dispatch_key, "
                "distributed_backends, amp_module, fp64, renames, fused_apis, fused_optimizers, fused_modules, "
                "library_ops, profile)");
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", " + ok + "\"device_module_alias\": \"torch.t\"}"),
            file() + ": \"device_module_alias\" is set but \"device_module\" is missing");
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", \"renames\": {\"methods\": [\"cuda\"]}}"),
            file() + ": \"renames.methods\" must be an object of strings");
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", \"renames\": {\"method\": {}}}"),
            file() + ": unknown key \"renames.method\" (known: methods, attributes, distributed_backends, env_vars)");
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", \"kind\": \"accelerator\", \"device_type\": \"\"}"),
            file() + ": \"device_type\" is empty (the device string that replaces \"cuda\", e.g. \"npu\")");
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", \"kind\": \"gpu\"}"), file() + ": \"kind\" must be \"accelerator\" or \"cpu\"");
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", \"default\": \"yes\"}"), file() + ": \"default\" must be true or false");
  EXPECT_EQ(ErrorOf("{\"description\": \"no name\"}"),
            file() +
                ": missing required keys \"name\", \"kind\", \"device_type\" (docs/targets.md describes "
                "target.json)");
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", \"kind\": \"cpu\"}"),
            file() + ": missing required key \"device_type\" (docs/targets.md describes target.json)");
  EXPECT_EQ(ErrorOf("{\"name\": \"\", " + ok + "\"versions\": []}"), file() + ": \"name\" is empty");
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", " + ok + "\"python_module\": \"torch_t\"}"),
            file() + ": \"python_module\" is set but \"import_line\" is missing");
  EXPECT_EQ(ErrorOf("{\"name\": \"t\",").rfind(file() + ": not valid JSON (", 0), 0u);
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", \"profile\": {\"fusion_apis\": {\"RMSNorm\": \"\"}}}"),
            file() + ": \"profile.fusion_apis.RMSNorm\" is empty");
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", \"profile\": {\"non_native_ops\": [{\"name\": \"Mish\"}]}}"),
            file() + ": each of \"profile.non_native_ops\" needs a \"name\" and a \"replacement\"");
  EXPECT_EQ(ErrorOf("{\"name\": \"t\", \"profile\": {\"non_native_ops\": [{\"nme\": \"Mish\"}]}}"),
            file() +
                ": unknown key \"profile.non_native_ops.nme\" (known: name, why, modules, ops, decomposed, "
                "decomposed_backward, replacement, caveat)");
  EXPECT_EQ(ErrorOf("{" + ok + "\"name\": \"t\"}"), "ok");
  auto missing = LoadTargetFacts(dir_ / "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), (dir_ / "nope" / "target.json").string() + ": no such file");
}

// A data folder with only targets/<name>/target.json, laid over the shipped data.
TEST_F(BadTarget, DataFoldersAreASearchPathOverTheShippedData) {
  fs::create_directories(dir_ / "targets" / "mine");
  std::ofstream(dir_ / "targets" / "mine" / "target.json")
      << R"({"name": "mine", "kind": "accelerator", "device_type": "mine"})";
  DataDirs data(std::vector<fs::path>{dir_, kData});
  EXPECT_EQ(ListTargets(data), (std::vector<std::string>{"cpu", "mine", "npu"}));
  EXPECT_EQ(TargetDir(data, "mine"), dir_ / "targets" / "mine");
  EXPECT_EQ(TargetDir(data, "npu"), kData / "targets" / "npu");
  EXPECT_EQ(*DefaultTargetName(data), "npu");
  EXPECT_EQ(MigrateTargets(data), (std::vector<std::string>{"mine", "npu"}));
  auto mine = LoadTarget(data, "mine");
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  EXPECT_TRUE(mine->migratable());
  EXPECT_EQ(data.Find("cuda/cuda_only.json"), kData / "cuda" / "cuda_only.json");
  // An earlier folder's target hides the shipped one of the same name.
  fs::create_directories(dir_ / "targets" / "npu");
  std::ofstream(dir_ / "targets" / "npu" / "target.json")
      << R"({"name": "npu", "kind": "accelerator", "device_type": "npu", "default": true})";
  EXPECT_EQ(TargetDir(data, "npu"), dir_ / "targets" / "npu");
  EXPECT_EQ(*DefaultTargetName(data), "npu");
}

TEST_F(BadTarget, TwoDefaultsAreAnErrorNamingBothFiles) {
  fs::create_directories(dir_ / "targets" / "mine");
  std::ofstream(dir_ / "targets" / "mine" / "target.json")
      << R"({"name": "mine", "kind": "accelerator", "device_type": "mine", "default": true})";
  DataDirs data(std::vector<fs::path>{dir_, kData});
  auto def = DefaultTargetName(data);
  ASSERT_FALSE(def.ok());
  EXPECT_EQ(def.status().message(),
            "more than one default target: " + (dir_ / "targets" / "mine" / "target.json").string() + " and " +
                (kData / "targets" / "npu" / "target.json").string() +
                " each say \"default\": true; keep it in one of them, or name the target with --target");
  EXPECT_EQ(CheckTargetChoice(data, "", false), def.status().message());
  EXPECT_EQ(CheckTargetChoice(data, "mine", false), "");  // a named target needs no default
}

}  // namespace
}  // namespace portkit::target
