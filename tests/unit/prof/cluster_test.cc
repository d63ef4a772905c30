// prof cluster as a library (src/prof/cluster/cluster.h) on synthetic per-rank Kineto traces
// whose every time is chosen, so each figure can be derived from the layout below.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/context.h"
#include "core/log.h"
#include "prof/cluster/cluster.h"

namespace portkit::prof::cluster {
namespace {
namespace fs = std::filesystem;

// The layout (absolute µs after kBase): three steps of 1000 µs; in steps 1 and 2 each rank
// computes from 100 µs for kCompute[rank] µs, then joins an allreduce of 1,000,000 floats
// (4 MB) that ends at 700 µs (rank 2: 800 µs, a slow link). Step 3 is the last step and its
// work is left out (HTA's rule). Each rank's baseTimeNanoseconds differs by 1 ms and its ts by
// the opposite amount, so the ranks only line up on absolute time.
constexpr int64_t kBaseNs = 1'700'000'000'000'000'000;
constexpr int64_t kCompute[4] = {300, 300, 300, 400};
constexpr int64_t kEnd[4] = {700, 700, 800, 700};

std::string Event(const std::string& cat, const std::string& name, int64_t ts, int64_t dur, const std::string& args,
                  int pid = 1, int tid = 1) {
  return "{\"ph\":\"X\",\"cat\":\"" + cat + "\",\"name\":\"" + name + "\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + std::to_string(ts) + ",\"dur\":" + std::to_string(dur) +
         ",\"args\":{" + args + "}}";
}

std::string RankTraceText(int rank, bool with_rank = true) {
  const int64_t shift = rank * 1000;  // µs added to every ts; the base is 1 ms earlier per rank
  std::string ev;
  auto add = [&](const std::string& e) { ev += (ev.empty() ? "" : ",\n") + e; };
  int corr = 1;
  for (int step = 1; step <= 3; ++step) {
    int64_t t0 = (step - 1) * 1000 + shift;
    add(Event("user_annotation", "ProfilerStep#" + std::to_string(step), t0, 1000, "", 1, 1));
    add(Event("cuda_runtime", "cudaLaunchKernel", t0 + 10, 5, "\"correlation\":" + std::to_string(corr)));
    add(Event("kernel", "volta_sgemm_128x64_nn", t0 + 100, kCompute[rank],
              "\"stream\":7,\"correlation\":" + std::to_string(corr), 0, 7));
    ++corr;
    add(Event("cuda_runtime", "cudaLaunchKernel", t0 + 20, 5, "\"correlation\":" + std::to_string(corr)));
    int64_t start = t0 + 100 + kCompute[rank];
    add(Event("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", start,
              kEnd[rank] + t0 - start,
              "\"stream\":20,\"correlation\":" + std::to_string(corr) +
                  ",\"Collective name\":\"allreduce\",\"In msg nelems\":1000000,\"Out msg nelems\":1000000,"
                  "\"Group size\":4,\"dtype\":\"Float\",\"Process Group Name\":\"0\","
                  "\"Process Group Ranks\":\"[0, 1, 2, 3]\"",
              0, 20));
    ++corr;
    if (step == 1 && rank < 2) {  // a point-to-point transfer 0 -> 1 of 250,000 bf16 (500 kB)
      add(Event("cuda_runtime", "cudaLaunchKernel", t0 + 30, 5, "\"correlation\":" + std::to_string(corr)));
      add(Event("kernel", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", t0 + 800, 100,
                "\"stream\":21,\"correlation\":" + std::to_string(corr) + ",\"Collective name\":\"" +
                    (rank == 0 ? "send" : "recv") +
                    "\",\"In msg nelems\":250000,\"Out msg nelems\":250000,\"dtype\":\"BFloat16\","
                    "\"Src Rank\":0,\"Dst Rank\":1",
                0, 21));
      ++corr;
    }
  }
  std::string info = with_rank ? "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " + std::to_string(rank) +
                                     ", \"world_size\": 4},\n"
                               : "";
  return "{\"schemaVersion\": 1,\n" + info + "\"traceEvents\": [\n" + ev +
         "\n],\n\"baseTimeNanoseconds\": " + std::to_string(kBaseNs - rank * 1'000'000) + "}\n";
}

class Cluster : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_cluster_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "job");
    for (int r = 0; r < 4; ++r)
      std::ofstream(dir_ / "job" / ("worker" + std::to_string(r) + ".json")) << RankTraceText(r);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Logger logger_{nullptr, SystemClock()};
  Context ctx_{logger_, SystemClock(), PORTKIT_TEST_DATA_DIR};
  fs::path dir_;
};

TEST_F(Cluster, ReadsOneRankOnAbsoluteTime) {
  auto t = ReadRankTrace(dir_ / "job" / "worker2.json", "worker2.json", -1);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->rank, 2);
  EXPECT_EQ(t->world_size, 4);
  EXPECT_EQ(t->backend, "nccl");
  EXPECT_TRUE(t->has_base_time);
  ASSERT_EQ(t->steps.size(), 3u);
  EXPECT_EQ(t->steps[0].cpu_start, kBaseNs);  // base - 2 ms, ts + 2 ms
  // Steps 1 and 2: a compute and an allreduce each; step 3 (the last) left out.
  ASSERT_EQ(t->tasks.size(), 4u);
  EXPECT_EQ(t->excluded_tasks, 2u);
  EXPECT_EQ(t->tasks[0].cls, TaskClass::kCompute);
  EXPECT_EQ(t->tasks[1].cls, TaskClass::kCommunication);
  EXPECT_EQ(t->tasks[1].end, kBaseNs + 800'000);
  ASSERT_EQ(t->comms.size(), 2u);
  EXPECT_EQ(t->comms[0].args.op, "allreduce");
  EXPECT_EQ(t->comms[0].args.group, "0");
  EXPECT_EQ(t->comms[0].Bytes(), 4'000'000);
  auto all = ReadRankTrace(dir_ / "job" / "worker2.json", "worker2.json", -1, /*include_last_step=*/true);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->tasks.size(), 6u);
}

TEST_F(Cluster, BreakdownSlowRankAndCommunication) {
  auto r = RunCluster({dir_ / "job", false}, ctx_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->ranks.size(), 4u);
  EXPECT_EQ(r->origin_ns, kBaseNs);
  for (const auto& s : r->ranks) EXPECT_EQ(s.offset_ns, 0) << s.rank;  // aligned despite different ts

  // Rank 3, step 1: compute 400 µs, allreduce 500..700, window to the next step's first task (1100).
  const auto& b3 = r->breakdown[3];
  ASSERT_EQ(b3.steps.size(), 2u);
  EXPECT_EQ(b3.steps[0].step, 1);
  EXPECT_EQ(b3.steps[0].split.window, 1'000'000);
  EXPECT_EQ(b3.steps[0].split.compute, 400'000);
  EXPECT_EQ(b3.steps[0].split.communication, 200'000);
  EXPECT_EQ(b3.steps[0].split.idle(), 400'000);
  EXPECT_EQ(b3.steps[0].preparing, 100'000);
  // Whole trace of rank 0: first task at 100, last end at 1700; busy 2 x (300 + 300) + p2p 100.
  const auto& t0 = r->breakdown[0].total;
  EXPECT_EQ(t0.window, 1'600'000);
  EXPECT_EQ(t0.compute, 600'000);
  EXPECT_EQ(t0.communication, 700'000);
  EXPECT_EQ(t0.overlapped, 0);
  EXPECT_EQ(t0.idle(), 1'600'000 - 1'300'000);

  // msprof-analyze's rule: compute 300/300/300/400 -> (400-300)/325 > 0.05, rank 3 to look at.
  const SlowRankCheck* compute = nullptr;
  for (const auto& c : r->slow_ranks)
    if (c.step == 1 && c.quantity == "compute") compute = &c;
  ASSERT_NE(compute, nullptr);
  EXPECT_TRUE(compute->slow);
  EXPECT_EQ(compute->suspect, 3);
  EXPECT_NEAR(compute->ratio, 100.0 / 325.0, 1e-12);

  // The first allreduce: the last rank (3) starts at 500 µs; rank 0 waited 100 µs, moved 4 MB in
  // 200 µs (20 GB/s); rank 2 took 300 µs (13.3 GB/s).
  const auto& comm = r->communication;
  const Collective* first = nullptr;
  for (const auto& c : comm.collectives)
    if (c.op == "allreduce" && c.index == 0) first = &c;
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(first->ranks.size(), 4u);
  EXPECT_EQ(first->step, 1);
  EXPECT_EQ(first->ranks[0].wait, 100'000);
  EXPECT_EQ(first->ranks[0].transit, 200'000);
  EXPECT_DOUBLE_EQ(first->ranks[0].bandwidth_gbps, 20.0);
  EXPECT_EQ(first->ranks[3].wait, 0);
  EXPECT_NEAR(first->ranks[2].bandwidth_gbps, 4e6 / 300e3, 1e-9);
  // Links: the ring 0->1->2->3->0 for allreduce; rank 2's link to 3 is slow (13.3 < 0.8 x 20).
  size_t ring = 0;
  for (const auto& l : comm.matrix) {
    if (l.op != "allreduce") continue;
    ++ring;
    EXPECT_EQ(l.dst, (l.src + 1) % 4);
    EXPECT_EQ(l.count, 2);
    EXPECT_EQ(l.slow, l.src == 2) << l.src;
  }
  EXPECT_EQ(ring, 4u);
  EXPECT_EQ(comm.slow_links, 1u);
  // The point-to-point transfer is a 0 -> 1 link on both sides, 500 kB in 100 µs.
  bool send = false;
  for (const auto& l : comm.matrix)
    if (l.op == "send") {
      send = true;
      EXPECT_TRUE(l.point_to_point);
      EXPECT_EQ(l.src, 0);
      EXPECT_EQ(l.dst, 1);
      EXPECT_DOUBLE_EQ(l.bandwidth_gbps, 5.0);
    }
  EXPECT_TRUE(send);
  // The receive is msprof's bubble on rank 1.
  EXPECT_EQ(r->breakdown[1].steps[0].split.receive, 100'000);
}

TEST_F(Cluster, ClearErrors) {
  fs::create_directories(dir_ / "dup");
  std::ofstream(dir_ / "dup" / "a.json") << RankTraceText(1);
  std::ofstream(dir_ / "dup" / "b.json") << RankTraceText(1);
  auto dup = RunCluster({dir_ / "dup", false}, ctx_);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      dup.status().message(),
      (dir_ / "dup").string() + ": rank 1 appears twice: a.json and b.json; keep one trace per rank in the folder");

  fs::create_directories(dir_ / "norank");
  std::ofstream(dir_ / "norank" / "trace.json") << RankTraceText(2, false);
  // As HTA: a trace naming no rank is rank 0, with a note.
  auto norank = RunCluster({dir_ / "norank", false}, ctx_);
  ASSERT_TRUE(norank.ok()) << norank.status().message();
  EXPECT_EQ(norank->ranks[0].rank, 0);
  EXPECT_EQ(norank->ranks[0].rank_source, RankSource::kAssumedZero);
  EXPECT_EQ(norank->ranks[0].warning.rfind("no rank in the trace nor in its file name: taken as rank 0;", 0), 0u)
      << norank->ranks[0].warning;
  // Two such traces both claim rank 0: an error that says why.
  std::ofstream(dir_ / "norank" / "other.json") << RankTraceText(3, false);
  auto two = RunCluster({dir_ / "norank", false}, ctx_);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().message(),
            (dir_ / "norank").string() +
                ": rank 0 appears twice: other.json and trace.json (a trace without distributedInfo.rank nor a rank in "
                "its file name is taken as rank 0; name the files like rank-3.json); keep one trace per rank in the "
                "folder");
  fs::remove(dir_ / "norank" / "other.json");
  fs::rename(dir_ / "norank" / "trace.json", dir_ / "norank" / "trace_rank_7.json");
  auto named = RunCluster({dir_ / "norank", false}, ctx_);
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(named->ranks[0].rank, 7);
  EXPECT_EQ(named->ranks[0].rank_source, RankSource::kFileName);

  fs::create_directories(dir_ / "none");
  auto none = RunCluster({dir_ / "none", false}, ctx_);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
}

TEST_F(Cluster, TargetNamesCommunicationKernels) {
  // A target whose data calls the sgemm kernels communication: each rank then has 2 of them
  // besides its 2 allreduces (steps 1 and 2; step 3 is left out), and rank 0 its send.
  fs::create_directories(dir_ / "tx");
  std::ofstream(dir_ / "tx" / "target.json")
      << R"({"name": "tx", "kind": "accelerator", "device_type": "tx", "profile": {"communication_kernels": ["volta_sgemm"]}})";
  ClusterOptions options{dir_ / "job", false};
  options.target = (dir_ / "tx").string();
  auto r = RunCluster(options, ctx_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->ranks.size(), 4u);
  EXPECT_EQ(r->ranks[0].comm_tasks, 5u);
  EXPECT_EQ(r->ranks[2].comm_tasks, 4u);
  auto plain = RunCluster({dir_ / "job", false}, ctx_);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->ranks[2].comm_tasks, 2u);

  // A named target that cannot be loaded is an error, not the default target's data.
  options.target = "nosuch";
  auto bad = RunCluster(options, ctx_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(bad.status().message(),
            "unknown target 'nosuch'; available targets: cpu, npu (or the path of a folder holding a target.json)");
}

TEST(ClusterUnits, RankFromFileName) {
  EXPECT_EQ(RankFromFileName("rank-3.json"), 3);
  EXPECT_EQ(RankFromFileName("trace_filter__sampled_rank-1.json.gz"), 1);
  EXPECT_EQ(RankFromFileName("worker_RANK_12.pt.trace.json"), 12);
  EXPECT_EQ(RankFromFileName("rank7"), 7);
  EXPECT_EQ(RankFromFileName("ranking.json"), -1);
  EXPECT_EQ(RankFromFileName("trace.json"), -1);
}

TEST(ClusterUnits, SplitWindowUnionsAndOverlap) {
  auto task = [](int64_t s, int64_t e, TaskClass c) {
    DeviceTask t;
    t.start = s, t.end = e, t.cls = c;
    return t;
  };
  // compute 0-40 and 30-60 (union 60), comm 50-90 (overlaps compute 50-60), memcpy 95-100.
  std::vector<DeviceTask> tasks = {task(0, 40, TaskClass::kCompute), task(30, 60, TaskClass::kCompute),
                                   task(50, 90, TaskClass::kCommunication), task(95, 100, TaskClass::kMemory)};
  TimeSplit s = SplitWindow(tasks, 0, 120);
  EXPECT_EQ(s.window, 120);
  EXPECT_EQ(s.compute, 60);
  EXPECT_EQ(s.communication, 40);
  EXPECT_EQ(s.overlapped, 10);
  EXPECT_EQ(s.exposed_communication(), 30);
  EXPECT_EQ(s.busy, 95);
  EXPECT_EQ(s.idle(), 25);
  EXPECT_EQ(s.non_compute(), 35);
  EXPECT_EQ(s.free(), 120 - 90);
  // Clipped to a window.
  TimeSplit c = SplitWindow(tasks, 35, 55);
  EXPECT_EQ(c.compute, 20);
  EXPECT_EQ(c.communication, 5);
}

TEST(ClusterUnits, SlowRankNeedsAllRanksAndTwoOfThem) {
  RankBreakdown a, b;
  a.rank = 0, b.rank = 1;
  StepSplit s;
  s.step = 5;
  s.split.window = 1000, s.split.compute = 500, s.split.communication = 100;
  a.steps.push_back(s);
  s.split.compute = 520;  // (520-500)/510 = 0.039: not slow
  b.steps.push_back(s);
  EXPECT_TRUE(FindSlowRanks({a}).empty());
  auto checks = FindSlowRanks({a, b});
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_EQ(checks[0].quantity, "compute");
  EXPECT_FALSE(checks[0].slow);
  EXPECT_EQ(checks[0].suspect, -1);
  b.steps[0].step = 6;  // no step common to both
  EXPECT_TRUE(FindSlowRanks({a, b}).empty());
}

}  // namespace
}  // namespace portkit::prof::cluster

namespace portkit::prof::cluster {
namespace {

TEST_F(Cluster, DigestsSurviveTheTripBetweenProcesses) {
  std::vector<RankDigest> digests;
  for (int r = 0; r < 4; ++r) {
    std::string name = "worker" + std::to_string(r) + ".json";
    digests.push_back(DigestRank(static_cast<size_t>(r), ReadRankTrace(dir_ / "job" / name, name, -1)));
  }
  digests.push_back(DigestRank(4, Expected<RankTrace>(ParseError("bad.json: corrupt"))));
  std::string bytes = SerializeDigests(digests);
  std::vector<RankDigest> back;
  ASSERT_TRUE(DeserializeDigests(bytes, &back).ok());
  ASSERT_EQ(back.size(), 5u);
  EXPECT_EQ(back[4].status.message(), "bad.json: corrupt");
  EXPECT_EQ(back[4].status.code(), ErrorCode::kParse);
  EXPECT_EQ(SerializeDigests(back), bytes);  // every field written is read back
  // Only communication tasks travel, and the analyses see the same thing.
  EXPECT_EQ(back[2].trace.tasks.size(), 2u);
  EXPECT_EQ(back[2].device_tasks, 4u);
  std::vector<RankTrace> traces;
  for (int r = 0; r < 4; ++r) traces.push_back(back[static_cast<size_t>(r)].trace);
  auto comm = AnalyseCommunication(traces);
  EXPECT_EQ(comm.slow_links, 1u);
  // Damaged bytes are an error, never a crash.
  for (size_t cut : {size_t{0}, size_t{7}, bytes.size() / 2, bytes.size() - 1}) {
    std::vector<RankDigest> partial;
    EXPECT_FALSE(DeserializeDigests(std::string_view(bytes).substr(0, cut), &partial).ok()) << cut;
  }
  std::string flipped = bytes;
  flipped[8 * 3 + 40] = '\x7f';
  std::vector<RankDigest> junk;
  (void)DeserializeDigests(flipped, &junk);  // must not crash whatever it decides
}

}  // namespace
}  // namespace portkit::prof::cluster
