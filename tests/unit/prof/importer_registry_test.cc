// The importer registry: detection by content, never by file name.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "prof/importers/importer.h"

namespace portkit::prof {
namespace {
namespace fs = std::filesystem;

const fs::path kTraces = fs::path(PORTKIT_TEST_DATA_DIR) / ".." / "tests" / "data" / "traces";

class ImporterRegistry : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_registry_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  fs::path Gzip(const fs::path& from, const std::string& name) {
    std::ifstream in(from, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fs::path p = dir_ / name;
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    return p;
  }
  std::string Detect(const fs::path& p) {
    const Importer* importer = DetectImporter(importers_, ReadFirstBytes(p));
    return importer ? std::string(importer->name()) : "none";
  }

  fs::path dir_;
  std::vector<std::unique_ptr<Importer>> importers_ = MakeImporters();
};

TEST_F(ImporterRegistry, EveryImporterHasAUniqueNameAndADescription) {
  std::set<std::string> names;
  for (const auto& i : importers_) {
    EXPECT_TRUE(names.insert(std::string(i->name())).second) << i->name();
    EXPECT_FALSE(i->description().empty());
  }
  EXPECT_EQ(names, (std::set<std::string>{"kineto", "legacy", "ascend_pt", "kernel_details"}));
}

TEST_F(ImporterRegistry, ReferenceTracesAreDetectedByContent) {
  EXPECT_EQ(Detect(kTraces / "kineto" / "trace_diff__control__control.json.gz"), "kineto");
  EXPECT_EQ(Detect(kTraces / "kineto" / "timeline_analysis__sampled_rank-0.json.gz"), "kineto");
  EXPECT_EQ(Detect(kTraces / "ascend" / "trace_view.json"), "ascend_pt");
  EXPECT_EQ(Detect(kTraces / "ascend" / "kernel_details.csv"), "kernel_details");
}

TEST_F(ImporterRegistry, AGzippedTraceViewIsStillATorchNpuTrace) {
  EXPECT_EQ(Detect(Gzip(kTraces / "ascend" / "trace_view.json", "trace_view.json.gz")), "ascend_pt");
  EXPECT_EQ(Detect(Gzip(kTraces / "ascend" / "trace_view.json", "renamed.bin")), "ascend_pt");
}

TEST_F(ImporterRegistry, ARenamedKernelDetailsIsFoundByItsHeader) {
  std::ifstream in(kTraces / "ascend" / "kernel_details.csv", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(Detect(Write("device_tasks.txt", text)), "kernel_details");
  EXPECT_EQ(Detect(Write("bom.csv", "\xEF\xBB\xBF" + text)), "kernel_details");
}

TEST_F(ImporterRegistry, LegacyArraysAndKinetoObjectsAreToldApart) {
  EXPECT_EQ(Detect(Write("a.json", "[{\"name\": \"aten::mm\", \"ph\": \"X\", \"ts\": 1.5, \"dur\": 2}]")), "legacy");
  EXPECT_EQ(Detect(Write("b.json", "[\n {\"ph\": \"X\", \"name\": \"aten::mm\", \"ts\" : \"12.5\", \"dur\": 2}]")),
            "ascend_pt");
  EXPECT_EQ(Detect(Write("c.trace", "{\"traceEvents\": []}")), "kineto");
  EXPECT_EQ(Detect(Write("d", "  {\"schemaVersion\": 1, \"deviceProperties\": []}")), "kineto");
}

TEST_F(ImporterRegistry, ContentThatIsNoTraceIsNotClaimed) {
  EXPECT_EQ(Detect(Write("config.json", "{\"lr\": 0.1, \"epochs\": 3}")), "none");
  EXPECT_EQ(Detect(Write("list.json", "[1, 2, 3]")), "none");
  EXPECT_EQ(Detect(Write("objects.json", "[{\"name\": \"a\"}]")), "none");
  EXPECT_EQ(Detect(Write("empty.json", "")), "none");
  EXPECT_EQ(Detect(Write("notes.txt", "hello")), "none");
  // portkit's own op_summary has "Task Start Time(us)", not the kernel_details columns.
  EXPECT_EQ(Detect(Write("op_summary.csv",
                         "Trace,Device_id,Stream,Op Name,OP Type,Task Type,Task Start Time(us),"
                         "Task Duration(us)\n")),
            "none");
  EXPECT_EQ(Detect(dir_ / "missing.json"), "none");
}

}  // namespace
}  // namespace portkit::prof
