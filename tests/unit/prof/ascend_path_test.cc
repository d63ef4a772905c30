// The Ascend path: a torch_npu trace_view.json's processes ("CANN" AscendCL calls, "Ascend
// Hardware" device tasks, "HCCL" communication, "Overlap Analysis" spans) become host API, device
// task and communication events, on the real reference trace and on small hand-made ones
// (metadata after the events, an HCCL task).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/context.h"
#include "core/log.h"
#include "prof/api.h"

namespace portkit::prof {
namespace {
namespace fs = std::filesystem;

const fs::path kTraces = fs::path(PORTKIT_TEST_DATA_DIR) / ".." / "tests" / "data" / "traces";

class AscendPath : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_ascend_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Imports `text` as `name` in folder `sub`; returns the one trace's result.
  ImportResult ImportText(const std::string& sub, const std::string& name, const std::string& text) {
    fs::path d = dir_ / sub;
    fs::create_directories(d);
    std::ofstream(d / name) << text;
    auto r = RunImport({d}, ctx_);
    EXPECT_TRUE(r.ok());
    if (!r.ok() || r->traces.size() != 1) return {};
    EXPECT_TRUE(r->traces[0].status.ok()) << r->traces[0].status.message();
    return r->traces[0].result;
  }

  static uint64_t Kind(const ImportResult& r, const std::string& kind) {
    auto it = r.per_kind.find(kind);
    return it == r.per_kind.end() ? 0 : it->second;
  }

  Logger logger_{nullptr, SystemClock()};
  Context ctx_{logger_, SystemClock(), PORTKIT_TEST_DATA_DIR};
  fs::path dir_;
};

std::string Meta(int64_t pid, const std::string& process) {
  return R"({"ph": "M", "name": "process_name", "pid": )" + std::to_string(pid) + R"(, "tid": 0, "args": {"name": ")" +
         process + "\"}}";
}
std::string Task(int64_t pid, const std::string& name, const std::string& ts, double dur) {
  return R"({"ph": "X", "name": ")" + name + R"(", "pid": )" + std::to_string(pid) + R"(, "tid": 3, "ts": ")" + ts +
         R"(", "dur": )" + std::to_string(dur) + "}";
}
std::string Step(const std::string& ts, double dur) {
  return R"({"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": ")" + ts +
         R"(", "dur": )" + std::to_string(dur) + "}";
}

TEST_F(AscendPath, ReferenceTraceHasDeviceTasksAscendClCallsAndNoOverlapOperators) {
  std::ifstream in(kTraces / "ascend" / "trace_view.json", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  ImportResult r = ImportText("ref", "trace_view.json", text);
  EXPECT_EQ(r.format, "ascend_pt");
  // Counted independently from the file: 276 "Ascend Hardware" X events, 382 "CANN" (AscendCL@)
  // X events; "other": 547 "Overlap Analysis" X events plus torch_npu's task-queue spans (148
  // cat "enqueue", 148 cat "dequeue").
  EXPECT_EQ(Kind(r, "kernel"), 276u);
  EXPECT_EQ(Kind(r, "runtime"), 382u);
  EXPECT_EQ(Kind(r, "other"), 547u + 148u + 148u);

  auto a = RunAnalyse({dir_ / "ref"}, ctx_);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_GT(a->breakdown.compute, 0);
  EXPECT_EQ(a->breakdown.steps, 1u);
  for (const auto& [name, ns] : a->top_operators) {
    EXPECT_NE(name, "Free");
    EXPECT_NE(name, "Computing");
  }
  for (const auto& op : a->host_ops) EXPECT_NE(op.name, "Free");

  auto s = RunExportSummary({dir_ / "ref"}, ctx_);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto api = std::find_if(s->tables.begin(), s->tables.end(), [](const auto& t) { return t.name == "api_statistic"; });
  ASSERT_NE(api, s->tables.end());
  size_t acl = 0;
  for (const auto& row : api->rows) acl += row[1].rfind("AscendCL@", 0) == 0;
  EXPECT_EQ(acl, api->rows.size());
  EXPECT_GT(acl, 10u);
  bool execute = std::any_of(api->rows.begin(), api->rows.end(),
                             [](const auto& row) { return row[1] == "AscendCL@aclopCompileAndExecute"; });
  EXPECT_TRUE(execute);
}

TEST_F(AscendPath, MetadataAfterTheEventsStillNamesTheProcesses) {
  std::string text = "[" + Step("1000.0", 100) + ", " + Task(800, "aclnnAdd_AddAiCore_Add", "1010.0", 20) + ", " +
                     Task(900, "AscendCL@aclnnAdd", "1005.0", 4) + ", " + Meta(800, "Ascend Hardware") + ", " +
                     Meta(900, "CANN") + "]";
  ImportResult r = ImportText("late", "trace_view.json", text);
  EXPECT_EQ(r.format, "ascend_pt");
  EXPECT_EQ(Kind(r, "kernel"), 1u);
  EXPECT_EQ(Kind(r, "runtime"), 1u);
  EXPECT_EQ(Kind(r, "other"), 0u);
  auto a = RunAnalyse({dir_ / "late"}, ctx_);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->breakdown.compute, 20000);
}

TEST_F(AscendPath, HcclTasksAreCommunicationNotCompute) {
  std::string text = "[" + Meta(800, "Ascend Hardware") + ", " + Meta(801, "HCCL") + ", " + Step("1000.0", 200) + ", " +
                     Task(800, "aclnnMm_MatMulAiCore_MatMul", "1010.0", 50) + ", " +
                     Task(801, "hcom_allReduce__123_0_1", "1070.0", 80) + "]";
  ImportText("hccl", "trace_view.json", text);
  auto a = RunAnalyse({dir_ / "hccl"}, ctx_);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->breakdown.compute, 50000);
  EXPECT_EQ(a->breakdown.communication, 80000);
}

}  // namespace
}  // namespace portkit::prof

namespace portkit::prof {
namespace {

// An ASCEND_PROFILER_OUTPUT folder: trace_view.json's two device tasks on stream 3 and
// kernel_details.csv's rows for them (start times equal to the microsecond digits torch_npu writes)
// plus one row with no task. The joined tasks are counted once, on trace_view's timeline, with the
// row's shapes; the unmatched row joins that timeline and its step.
TEST_F(AscendPath, KernelDetailsJoinsTheTraceViewTasksOfItsFolder) {
  fs::path out = dir_ / "run_ascend_pt" / "ASCEND_PROFILER_OUTPUT";
  fs::create_directories(out);
  std::ofstream(out / "trace_view.json") << "[" + Meta(800, "Ascend Hardware") + ", " + Step("1000.000", 300) + ", " +
                                                Task(800, "aclnnAdd_AddAiCore_Add", "1010.500", 20) + ", " +
                                                Task(800, "aclnnMm_MatMulAiCore_MatMul", "1050.250", 40) + "]";
  std::ofstream(out / "kernel_details.csv")
      << "Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),"
         "Block Dim,Input Shapes,Input Data Types\n"
         "1,0,1,3,Add1,Add,AI_VECTOR_CORE,1010.500,20,0,8,\"\"\"4,4\"\"\",FLOAT\n"
         "1,0,2,3,MatMul2,MatMul,AI_CORE,1050.250,40,0,16,\"\"\"4,4;4,4\"\"\",FLOAT;FLOAT\n"
         "1,0,3,3,Cast3,Cast,AI_CPU,1200.000,30,0,1,\"\"\"4\"\"\",FLOAT\n";
  auto r = RunImport({dir_ / "run_ascend_pt"}, ctx_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->traces.size(), 2u);
  for (const auto& t : r->traces) {
    ASSERT_TRUE(t.status.ok()) << t.status.message();
    if (t.importer == "kernel_details") {
      EXPECT_EQ(t.result.events, 0u);
      EXPECT_NE(t.result.warning.find("2 of 3 rows joined"), std::string::npos) << t.result.warning;
    } else {
      EXPECT_EQ(t.result.events, 3u + 1u);  // step + 2 tasks (metadata is not stored) + the unmatched row
    }
  }
  auto a = RunAnalyse({dir_ / "run_ascend_pt"}, ctx_);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->breakdown.compute, (20 + 40 + 30) * 1000);  // each task once
  auto s = RunExportSummary({dir_ / "run_ascend_pt"}, ctx_);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const SummaryTable& ops = s->tables[0];
  ASSERT_EQ(ops.name, "op_summary");
  ASSERT_EQ(ops.rows.size(), 3u);
  int with_shapes = 0;
  for (const auto& row : ops.rows)
    if (row[3] != "Cast3") {
      EXPECT_FALSE(row[10].empty()) << row[3];  // Input Shapes from the joined row
      EXPECT_FALSE(row[9].empty()) << row[3];   // Block Num
      ++with_shapes;
    }
  EXPECT_EQ(with_shapes, 2);

  // Imported again: the same join, nothing doubled.
  auto again = RunImport({dir_ / "run_ascend_pt"}, ctx_);
  ASSERT_TRUE(again.ok());
  auto a2 = RunAnalyse({dir_ / "run_ascend_pt"}, ctx_);
  ASSERT_TRUE(a2.ok());
  EXPECT_EQ(a2->breakdown.compute, a->breakdown.compute);
}

}  // namespace
}  // namespace portkit::prof
