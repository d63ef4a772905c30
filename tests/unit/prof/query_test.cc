// The query API of an imported profile (src/prof/api.h, "query"): rows of a store written here
// event by event (exact values), and of a real Kineto trace against what `prof export summary`
// computes from the same store.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "core/context.h"
#include "core/log.h"
#include "core/sqlite.h"
#include "prof/api.h"

namespace portkit::prof {
namespace {
namespace fs = std::filesystem;

const fs::path kTraces = fs::path(PORTKIT_TEST_DATA_DIR) / ".." / "tests" / "data" / "traces";

class ProfQuery : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_query_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// A store of one trace: two steps, nested host operators and two kernels on one stream.
  void WriteSmallStore() {
    auto store = Store::Open(dir_ / kStoreFileName);
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto trace = store->BeginTrace("rank0.json", "kineto");
    ASSERT_TRUE(trace.ok()) << trace.status().message();
    auto add = [&](EventKind kind, std::string_view name, int64_t pid, int64_t tid, int64_t ts, int64_t dur,
                   std::string_view dims = "", std::string_view args = "") {
      Event e;
      e.kind = kind, e.name = name, e.category = EventKindName(kind);
      e.pid = pid, e.tid = tid, e.ts_ns = ts, e.dur_ns = dur;
      e.input_dims = dims, e.args = args;
      if (kind == EventKind::kKernel) e.correlation = ts;
      ASSERT_TRUE(trace->AddEvent(e).ok());
    };
    add(EventKind::kStep, "ProfilerStep#0", 1, 1, 0, 100);
    add(EventKind::kStep, "ProfilerStep#1", 1, 1, 100, 150);
    add(EventKind::kCpuOp, "aten::linear", 1, 1, 10, 50, "[[4, 8], [16, 8], [16]]");
    add(EventKind::kCpuOp, "aten::addmm", 1, 1, 20, 30, "[[16], [4, 8], [8, 16]]");
    add(EventKind::kCpuOp, "aten::relu", 1, 1, 110, 20);
    add(EventKind::kKernel, "ncclKernel_AllReduce_RING_LL_Sum_float", 0, 7, 120, 40, "",
        R"({"Collective name": "allreduce", "Process Group Name": "0", "dtype": "Float", )"
        R"("In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 2})");
    add(EventKind::kKernel, "volta_sgemm_128x64_nn", 0, 7, 30, 10);
    ASSERT_TRUE(trace->Finish(7, 0, "").ok());
  }

  Expected<ProfileQuery> Open() {
    QueryOptions options;
    options.dir = dir_;
    options.data_dir = PORTKIT_TEST_DATA_DIR;
    return OpenProfile(options);
  }

  Logger logger_{nullptr, SystemClock()};
  Context ctx_{logger_, SystemClock(), PORTKIT_TEST_DATA_DIR};
  fs::path dir_;
};

TEST_F(ProfQuery, EventsInStoreOrderWithEveryField) {
  WriteSmallStore();
  auto q = Open();
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->folder(), dir_);
  EXPECT_TRUE(q->warnings().empty());
  std::vector<std::string> seen;
  EventRow linear;
  std::string linear_dims;
  ASSERT_TRUE(q->ForEachEvent({}, [&](const EventRow& e) {
                 seen.push_back(std::string(e.kind) + " " + std::string(e.name) + " " + std::to_string(e.pid) + "/" +
                                std::to_string(e.tid) + " " + std::to_string(e.ts_ns) + "+" + std::to_string(e.dur_ns));
                 EXPECT_EQ(e.trace, "rank0.json");
                 EXPECT_EQ(e.category, e.kind);
                 if (e.name == "aten::linear") linear = e, linear_dims = std::string(e.input_dims);
                 return Status::Ok();
               }).ok());
  // Device and stream first (pid 0), then the host thread; an event before those it encloses.
  EXPECT_EQ(seen,
            (std::vector<std::string>{
                "kernel volta_sgemm_128x64_nn 0/7 30+10", "kernel ncclKernel_AllReduce_RING_LL_Sum_float 0/7 120+40",
                "step ProfilerStep#0 1/1 0+100", "cpu_op aten::linear 1/1 10+50", "cpu_op aten::addmm 1/1 20+30",
                "step ProfilerStep#1 1/1 100+150", "cpu_op aten::relu 1/1 110+20"}));
  EXPECT_TRUE(linear.has_input_dims);
  EXPECT_EQ(linear_dims, "[[4, 8], [16, 8], [16]]");
  EXPECT_EQ(linear.correlation, -1);
  EXPECT_EQ(linear.external_id, -1);
}

TEST_F(ProfQuery, EventFilters) {
  WriteSmallStore();
  auto q = Open();
  ASSERT_TRUE(q.ok()) << q.status().message();
  auto names = [&](const EventFilter& f) {
    std::vector<std::string> out;
    Status st = q->ForEachEvent(f, [&](const EventRow& e) {
      out.emplace_back(e.name);
      EXPECT_EQ(e.has_input_dims, !e.input_dims.empty());
      EXPECT_EQ(e.args.empty(), !f.with_args || e.name.substr(0, 4) != "nccl");
      return Status::Ok();
    });
    EXPECT_TRUE(st.ok()) << st.message();
    return out;
  };
  EventFilter ops;
  ops.kinds = {"cpu_op"};
  EXPECT_EQ(names(ops), (std::vector<std::string>{"aten::linear", "aten::addmm", "aten::relu"}));
  ops.names = {"aten::relu", "aten::addmm"};
  EXPECT_EQ(names(ops), (std::vector<std::string>{"aten::addmm", "aten::relu"}));
  EventFilter regex;
  regex.name_regex = "^aten::(add|re)";
  regex.limit = 1;
  EXPECT_EQ(names(regex), (std::vector<std::string>{"aten::addmm"}));
  regex.limit = 0;
  EXPECT_EQ(names(regex), (std::vector<std::string>{"aten::addmm", "aten::relu"}));
  EventFilter args;
  args.kinds = {"kernel"};
  args.with_args = true;
  EXPECT_EQ(names(args).size(), 2u);
  // The visitor's error stops the walk and comes back.
  int calls = 0;
  Status stop = q->ForEachEvent({}, [&](const EventRow&) {
    ++calls;
    return InvalidArgument("enough");
  });
  EXPECT_EQ(stop.message(), "enough");
  EXPECT_EQ(calls, 1);
  EventFilter bad;
  bad.name_regex = "(";
  Status st = q->ForEachEvent(bad, [](const EventRow&) { return Status::Ok(); });
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("'(' is not a regular expression (", 0), 0u) << st.message();
}

TEST_F(ProfQuery, OpsStepsAndComm) {
  WriteSmallStore();
  auto q = Open();
  ASSERT_TRUE(q.ok()) << q.status().message();
  auto ops = q->Ops();
  ASSERT_TRUE(ops.ok()) << ops.status().message();
  ASSERT_EQ(ops->size(), 3u);
  // aten::linear encloses aten::addmm: 50 - 30 ns of its own.
  EXPECT_EQ((*ops)[0].name, "aten::addmm");
  EXPECT_EQ((*ops)[0].input_dims, "[[16], [4, 8], [8, 16]]");
  EXPECT_EQ((*ops)[0].self_ns, 30);
  EXPECT_EQ((*ops)[1].name, "aten::linear");
  EXPECT_EQ((*ops)[1].count, 1);
  EXPECT_EQ((*ops)[1].self_ns, 20);
  EXPECT_EQ((*ops)[1].total_ns, 50);
  EXPECT_EQ((*ops)[2].name, "aten::relu");
  EXPECT_EQ((*ops)[2].input_dims, "");
  EventFilter linear;
  linear.name_regex = "linear";
  auto one = q->Ops(linear);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].name, "aten::linear");

  auto steps = q->Steps();
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  ASSERT_EQ(steps->size(), 2u);
  EXPECT_EQ((*steps)[0].name, "ProfilerStep#0");
  EXPECT_EQ((*steps)[0].number, 0);
  EXPECT_TRUE((*steps)[0].warmup);
  EXPECT_EQ((*steps)[1].trace, "rank0.json");
  EXPECT_EQ((*steps)[1].number, 1);
  EXPECT_EQ((*steps)[1].start_ns, 100);
  EXPECT_EQ((*steps)[1].end_ns, 250);
  EXPECT_FALSE((*steps)[1].warmup);

  auto comm = q->Comm();
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  ASSERT_EQ(comm->size(), 1u);
  const CommRow& c = (*comm)[0];
  EXPECT_EQ(c.name, "ncclKernel_AllReduce_RING_LL_Sum_float");
  EXPECT_EQ(c.device, 0);
  EXPECT_EQ(c.stream, 7);
  EXPECT_EQ(c.ts_ns, 120);
  EXPECT_EQ(c.dur_ns, 40);
  EXPECT_EQ(c.collective, "allreduce");
  EXPECT_EQ(c.group, "0");
  EXPECT_EQ(c.dtype, "Float");
  EXPECT_EQ(c.in_nelems, 1024);
  EXPECT_EQ(c.out_nelems, 1024);
  EXPECT_EQ(c.group_size, 2);
}

TEST_F(ProfQuery, ErrorsNameTheFolder) {
  auto missing = OpenProfile({dir_ / "nope"});
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(missing.status().message(), (dir_ / "nope").string() + " does not exist");
  auto empty = OpenProfile({dir_});
  EXPECT_EQ(empty.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(empty.status().message(), dir_.string() + " is not an imported profile (it holds no portkit.db); run " +
                                          "`portkit prof import -dir " + dir_.string() + "` first");
  {
    auto db = sql::Database::Open(dir_ / kStoreFileName);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("CREATE TABLE strings (id INTEGER PRIMARY KEY); PRAGMA user_version = 99;").ok());
  }
  auto newer = OpenProfile({dir_});
  EXPECT_EQ(newer.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(newer.status().message().find((dir_ / kStoreFileName).string() + ": profile store schema 99 is newer"),
            std::string::npos)
      << newer.status().message();
}

// A real trace (HTA's sampled rank 0: steps, shapes, NCCL kernels) against the summary tables.
TEST_F(ProfQuery, KinetoTraceAgreesWithExportSummary) {
  fs::copy_file(kTraces / "kineto" / "timeline_analysis__sampled_rank-0.json.gz", dir_ / "rank0.json.gz");
  auto imported = RunImport({dir_}, ctx_);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_TRUE(imported->FirstFailure().ok());
  auto summary = RunExportSummary({dir_}, ctx_);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  std::map<std::string, const SummaryTable*> tables;
  for (const auto& t : summary->tables) tables[t.name] = &t;

  auto q = Open();
  ASSERT_TRUE(q.ok()) << q.status().message();
  // Kernels: as many as kernel_statistic counts, per name.
  std::map<std::string, int64_t> kernels;
  EventFilter kernel;
  kernel.kinds = {"kernel"};
  ASSERT_TRUE(q->ForEachEvent(kernel, [&](const EventRow& e) {
                 ++kernels[std::string(e.name)];
                 return Status::Ok();
               }).ok());
  ASSERT_EQ(kernels.size(), tables.at("kernel_statistic")->rows.size());
  for (const auto& row : tables.at("kernel_statistic")->rows) EXPECT_EQ(std::to_string(kernels[row[0]]), row[1]);

  // Ops: host_op_summary row for row (name, shapes, count, self and total time).
  auto ops = q->Ops();
  ASSERT_TRUE(ops.ok()) << ops.status().message();
  const auto& host = tables.at("host_op_summary")->rows;
  ASSERT_EQ(ops->size(), host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    EXPECT_EQ((*ops)[i].name, host[i][0]);
    EXPECT_EQ((*ops)[i].input_dims, host[i][1]);
    EXPECT_EQ(std::to_string((*ops)[i].count), host[i][2]);
    EXPECT_EQ(Micros((*ops)[i].self_ns), host[i][3]);
    EXPECT_EQ(Micros((*ops)[i].total_ns), host[i][4]);
  }

  // Steps: step_trace's iterations (start and length).
  auto steps = q->Steps();
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  const auto& step_rows = tables.at("step_trace")->rows;
  ASSERT_EQ(steps->size(), step_rows.size());
  ASSERT_EQ(steps->size(), 2u);
  for (size_t i = 0; i < step_rows.size(); ++i) {
    EXPECT_EQ(std::to_string((*steps)[i].number), step_rows[i][1]);
    EXPECT_EQ(Micros((*steps)[i].start_ns), step_rows[i][6]);
    EXPECT_EQ(Micros((*steps)[i].end_ns - (*steps)[i].start_ns), step_rows[i][5]);
  }

  // Communication: the NCCL kernels.
  auto comm = q->Comm();
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  int64_t nccl = 0;
  for (const auto& [name, n] : kernels)
    if (name.rfind("ncclKernel", 0) == 0) nccl += n;
  EXPECT_EQ(static_cast<int64_t>(comm->size()), nccl);
  EXPECT_EQ(nccl, 10);
  for (const auto& c : *comm) EXPECT_EQ(c.trace, "rank0.json.gz");
}

}  // namespace
}  // namespace portkit::prof
