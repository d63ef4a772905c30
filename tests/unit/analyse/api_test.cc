// The analyse engine called as a library: RunAnalyse and RunMigrate on examples/cifar_cuda return
// their reports in process (no argv, no stdout), and the renderers turn them into the files.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "analyse/api.h"
#include "core/atomic_file.h"
#include "core/context.h"
#include "core/log.h"
#include "render/analyse_report.h"
#include "render/migrate_report.h"

namespace portkit::analyse {
namespace {
namespace fs = std::filesystem;

const fs::path kDataDir = PORTKIT_TEST_DATA_DIR;
const fs::path kCifar = kDataDir.parent_path() / "examples" / "cifar_cuda";

class EngineApi : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = fs::temp_directory_path() / ("portkit_api_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(out_);
  }
  void TearDown() override { fs::remove_all(out_); }

  Logger logger_{nullptr, SystemClock()};
  Context ctx_{logger_, SystemClock(), kDataDir, 2, true};
  fs::path out_;
};

bool HasFinding(const AnalyseReport& r, const std::string& file, uint32_t line, const std::string& op, Category c) {
  return std::any_of(r.findings.begin(), r.findings.end(), [&](const Finding& f) {
    return f.file == file && f.start_line == line && f.op == op && f.category == c;
  });
}

TEST(AnalyseModes, OneRowPerModeAndNamesRoundTrip) {
  std::vector<std::string_view> names;
  for (const auto& m : AnalyseModes()) {
    names.push_back(m.name);
    ASSERT_TRUE(AnalyseModeByName(m.name).has_value());
    EXPECT_EQ(*AnalyseModeByName(m.name), m.mode);
    EXPECT_EQ(ModeInfo(m.mode).name, m.name);
    EXPECT_NE(m.run, nullptr) << m.name;
  }
  EXPECT_EQ(names, (std::vector<std::string_view>{"torch_apis", "third_party", "affinity_apis", "dynamic_shape"}));
  EXPECT_FALSE(AnalyseModeByName("nosuchmode").has_value());
  EXPECT_EQ(ModeInfo(AnalyseMode::kDynamicShape).csv, CsvLayout::kNone);
  EXPECT_EQ(ModeInfo(AnalyseMode::kAffinityApis).csv, CsvLayout::kAffinityCalls);
}

// Rule selection and inline suppressions happen inside the engine: a library caller gets the
// filtered findings, and an unknown rule is an error before any file is written.
TEST_F(EngineApi, RunAnalyseAppliesSelectAndIgnore) {
  AnalyseOptions opt;
  opt.input = kCifar;
  opt.output = out_;
  opt.version = "2.1.0";
  auto all = RunAnalyse(opt, ctx_);
  ASSERT_TRUE(all.ok()) << all.status().message();
  size_t cuda = std::count_if(all->findings.begin(), all->findings.end(),
                              [](const Finding& f) { return f.rule == "cuda_specific"; });
  ASSERT_GT(cuda, 0u);
  ASSERT_LT(cuda, all->findings.size());
  fs::remove_all(out_);
  opt.select = {"cuda_specific"};
  auto selected = RunAnalyse(opt, ctx_);
  ASSERT_TRUE(selected.ok()) << selected.status().message();
  EXPECT_EQ(selected->findings.size(), cuda);
  for (const auto& f : selected->findings) EXPECT_EQ(f.rule, "cuda_specific");
  fs::remove_all(out_);
  opt.select.clear();
  opt.ignore = {"cuda_specific"};
  auto ignored = RunAnalyse(opt, ctx_);
  ASSERT_TRUE(ignored.ok()) << ignored.status().message();
  EXPECT_EQ(ignored->findings.size(), all->findings.size() - cuda);
  fs::remove_all(out_);
  opt.ignore = {"no_such_rule"};
  auto bad = RunAnalyse(opt, ctx_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--ignore: unknown rule 'no_such_rule' (`portkit analyse --explain` lists them)");
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(EngineApi, RunAnalyseReturnsTheFindingsAndWritesNoReportFiles) {
  AnalyseOptions opt;
  opt.input = kCifar;
  opt.output = out_;
  opt.version = "2.1.0";
  auto report = RunAnalyse(opt, ctx_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->mode, AnalyseMode::kTorchApis);
  EXPECT_EQ(report->target, "npu");
  EXPECT_EQ(report->list_version, "2.1");
  EXPECT_EQ(report->project, "cifar_cuda");
  EXPECT_EQ(report->results_dir, fs::absolute(out_) / "cifar_cuda_analysis");
  EXPECT_EQ(report->files.python_analysed, 8u);
  EXPECT_EQ(report->files.syntax_errors, 0u);
  EXPECT_TRUE(report->problems.empty());
  // The same findings as the golden report (tests/golden/analyse_cifar_npu_2.1).
  EXPECT_EQ(report->findings.size(), 41u);
  EXPECT_EQ(report->Count(Category::kUnsupported), 7u);
  EXPECT_EQ(report->Count(Category::kPrecision), 2u);
  EXPECT_EQ(report->Count(Category::kAffinity), 0u);
  EXPECT_TRUE(HasFinding(*report, "cifar_cuda/models/resnet.py", 51, "torch.cdist", Category::kUnsupported));
  EXPECT_TRUE(HasFinding(*report, "cifar_cuda/train.py", 63, "torch.nn.utils.clip_grad_norm_", Category::kUnsupported));
  EXPECT_TRUE(std::is_sorted(report->findings.begin(), report->findings.end()));
  ASSERT_EQ(report->custom_ops.size(), 1u);
  EXPECT_EQ(report->custom_ops[0].name, "nms_cuda");
  EXPECT_EQ(report->custom_ops[0].how, "PYBIND11_MODULE");
  // The engine made the results folder; the report files are the renderer's.
  EXPECT_TRUE(fs::is_directory(report->results_dir));
  // Only the output marker (docs/safety.md): a later walk of a folder holding it skips it.
  EXPECT_EQ(std::distance(fs::directory_iterator(report->results_dir), fs::directory_iterator()), 1);
  EXPECT_TRUE(fs::is_regular_file(report->results_dir / ".portkit-output"));

  auto table = render::WriteAnalyseReports(*report, {"csv", "json"}, logger_);
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_NE(table->find("|    unsupported_api.csv     |     7      |"), std::string::npos) << *table;
  auto csv = ReadFile(report->results_dir / "unsupported_api.csv");
  ASSERT_TRUE(csv.ok());
  EXPECT_NE(csv->find("cifar_cuda/models/resnet.py,51,51,torch.cdist,"), std::string::npos);
  simdjson::dom::parser parser;
  simdjson::dom::element json;
  ASSERT_EQ(parser.load((report->results_dir / "report.json").string()).get(json), simdjson::SUCCESS);
  EXPECT_EQ(std::string_view(json["mode"].get_string().value()), "torch_apis");
  EXPECT_EQ(json["findings"].get_array().size(), 41u);
  EXPECT_TRUE(fs::exists(report->results_dir / "pytorch_analysis.txt"));
  EXPECT_FALSE(fs::exists(report->results_dir / "report.sarif"));
}

TEST_F(EngineApi, RunAnalyseModesFromTheTable) {
  AnalyseOptions opt;
  opt.input = kCifar;
  opt.output = out_;
  opt.version = "2.1.0";
  opt.mode = AnalyseMode::kThirdParty;
  auto lib = RunAnalyse(opt, ctx_);
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  EXPECT_FALSE(lib->affected.empty());
  auto csvs = render::AnalyseCsvFiles(*lib);
  ASSERT_EQ(csvs.size(), 6u);
  EXPECT_EQ(csvs[0].name, "full_unsupported_results.csv");

  opt.mode = AnalyseMode::kDynamicShape;
  fs::remove_all(out_);
  auto dyn = RunAnalyse(opt, ctx_);
  ASSERT_TRUE(dyn.ok()) << dyn.status().message();
  EXPECT_TRUE(dyn->findings.empty());
  EXPECT_GE(dyn->copy.files_copied, 12u);
  EXPECT_TRUE(std::count(dyn->copy.files.begin(), dyn->copy.files.end(), "msft_dynamic_analysis/hook.py"));
  EXPECT_TRUE(fs::exists(dyn->results_dir / "train.py"));
  EXPECT_TRUE(render::AnalyseCsvFiles(*dyn).empty());
}

TEST_F(EngineApi, RunAnalyseErrorsComeBeforeAnyFile) {
  AnalyseOptions opt;
  opt.input = kCifar / "missing";
  opt.output = out_;
  auto missing = RunAnalyse(opt, ctx_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);

  opt.input = kCifar;
  opt.target = "nosuchtarget";
  auto target = RunAnalyse(opt, ctx_);
  ASSERT_FALSE(target.ok());
  EXPECT_NE(target.status().message().find("unknown target 'nosuchtarget'"), std::string::npos);

  opt.target = "npu";
  fs::create_directories(out_);
  ASSERT_TRUE(WriteFileAtomic(out_ / "bad.csv", "File,Message\na,b\n").ok());
  opt.api_files = {(out_ / "bad.csv").string()};
  opt.output = out_ / "results";
  auto api = RunAnalyse(opt, ctx_);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), ErrorCode::kParse);
  EXPECT_FALSE(fs::exists(out_ / "results"));
}

TEST_F(EngineApi, RunMigrateReturnsTheChangesAndWritesTheCopy) {
  MigrateOptions opt;
  opt.input = kCifar;
  opt.output = out_;
  auto report = RunMigrate(opt, ctx_);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->target, "npu");
  EXPECT_EQ(report->project, "cifar_cuda");
  EXPECT_EQ(report->files_changed, 2u);
  EXPECT_EQ(report->files_copied, 12u);
  ASSERT_EQ(report->changes.size(), 13u);  // tests/golden/migrate_cifar/change_list.csv
  // torch.optim.AdamW is listed for review (the target's fused optimizer), not changed.
  EXPECT_EQ(std::count_if(report->changes.begin(), report->changes.end(),
                          [](const MigrateChange& c) { return c.operation == "Review"; }),
            1);
  // models/layers.py is loaded by the entry script train.py, which imports torch_npu: no import.
  const MigrateChange& first = report->changes[0];
  EXPECT_EQ(first.file, "cifar_cuda/models/layers.py");
  EXPECT_EQ(first.start_line, 27u);
  EXPECT_EQ(first.operation, "FuncNameModify");
  const MigrateChange& second = report->changes[1];
  EXPECT_EQ(second.file, "cifar_cuda/train.py");
  EXPECT_EQ(second.operation, "InsertImport");
  EXPECT_TRUE(std::any_of(report->changes.begin(), report->changes.end(), [](const MigrateChange& c) {
    return c.file == "cifar_cuda/train.py" && c.start_line == 58 &&
           c.message == "torch.cuda.amp.autocast → torch.npu.amp.autocast";
  }));
  // APIs the newest support list marks unsupported are left alone with a warning each.
  ASSERT_EQ(report->warnings.size(), 3u);
  EXPECT_EQ(report->warnings[0].kind, "unsupported_api");
  EXPECT_EQ(report->warnings[0].file, "cifar_cuda/models/resnet.py");
  // The copy and the patch are the engine's; the change lists are rendered.
  EXPECT_FALSE(std::count(report->files_written.begin(), report->files_written.end(), "migration.patch"));
  EXPECT_EQ(report->reports_dir, fs::absolute(out_) / "cifar_cuda_msft_report");
  EXPECT_TRUE(fs::is_regular_file(report->reports_dir / "migration.patch"));
  EXPECT_FALSE(fs::exists(report->results_dir / "migration.patch"));
  EXPECT_TRUE(std::count(report->files_written.begin(), report->files_written.end(), "train.py"));
  EXPECT_FALSE(fs::exists(report->results_dir / "change_list.csv"));
  auto patched = ReadFile(report->results_dir / "train.py");
  ASSERT_TRUE(patched.ok());
  EXPECT_NE(patched->find("torch.npu.amp.autocast"), std::string::npos);

  auto golden = ReadFile(kDataDir.parent_path() / "tests" / "golden" / "migrate_cifar" / "change_list.csv");
  ASSERT_TRUE(golden.ok());
  EXPECT_EQ(render::ChangeListCsv(*report), *golden);
  simdjson::dom::parser parser;
  simdjson::dom::element json;
  std::string text = render::ChangeListJson(*report);
  ASSERT_EQ(parser.parse(text).get(json), simdjson::SUCCESS) << text;
  EXPECT_EQ(json["changes"].get_array().size(), 13u);  // as many as the change list
  EXPECT_EQ(int64_t(json["files"]["changed"].get_int64().value()), 2);
}

TEST_F(EngineApi, RunMigrateRefusesAMissingInputAndAnUnknownTarget) {
  MigrateOptions opt;
  opt.input = kCifar / "missing";
  opt.output = out_;
  auto missing = RunMigrate(opt, ctx_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  opt.input = kCifar;
  opt.target = "nosuchtarget";
  EXPECT_FALSE(RunMigrate(opt, ctx_).ok());
  EXPECT_FALSE(fs::exists(out_));
}

}  // namespace
}  // namespace portkit::analyse
