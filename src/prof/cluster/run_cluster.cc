// `prof cluster`: find the ranks of a folder, reduce each (in parallel threads, and across MPI
// processes when there are several), then, on process 0, align them on absolute time and run the
// cross-rank analyses. One process goes through the same reduction, so its report is the same.
#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>

#include "core/thread_pool.h"
#include "prof/cluster/cluster.h"
#include "target/target_facts.h"

namespace portkit::prof::cluster {
namespace fs = std::filesystem;

Expected<ClusterReport> RunCluster(const ClusterOptions& options, Context& ctx) {
  std::unique_ptr<Exchange> single;
  Exchange* exchange = options.exchange;
  if (!exchange) single = MakeSingleProcessExchange(), exchange = single.get();
  ClusterReport report;
  report.dir = options.dir;
  report.processes = exchange->processes();
  report.root = exchange->process() == 0;
  auto files = FindRankFiles(options.dir, &report.skipped);
  if (!files.ok()) return files.status();
  if (files->empty())
    return NotFound(options.dir.string() + ": no Kineto trace found (" + std::to_string(report.skipped.size()) +
                    " other files); give the folder holding one trace per rank");

  std::vector<std::string> communication_kernels = options.communication_kernels;
  if (communication_kernels.empty()) {
    // The target's data names its collective library's tasks (HCCL's on the NPU); without data
    // only NCCL's and RCCL's kernels are known.
    if (auto facts = target::LoadTarget(ctx.data_dir, ""); facts.ok())
      communication_kernels = facts->profile.communication_kernels;
  }
  auto t0 = std::chrono::steady_clock::now();
  // This process's share: files p, p + P, p + 2P, ...
  std::vector<size_t> mine;
  for (size_t i = static_cast<size_t>(exchange->process()); i < files->size();
       i += static_cast<size_t>(exchange->processes()))
    mine.push_back(i);
  std::vector<RankDigest> digests(mine.size());
  {
    ThreadPool pool(std::max(
        1, std::min<int>(ctx.jobs > 0 ? ctx.jobs : ThreadPool::DefaultThreads(), static_cast<int>(mine.size()))));
    pool.ParallelFor(mine.size(), [&](int, size_t k) {
      size_t i = mine[k];
      std::error_code ec;
      std::string rel = fs::relative((*files)[i], options.dir, ec).string();
      std::string display = ec || rel.empty() ? (*files)[i].filename().string() : rel;
      int64_t hint = RankFromAscendFolder((*files)[i], options.dir);
      if (hint < 0) hint = RankFromFileName((*files)[i].filename().string());
      if (hint < 0) hint = RankFromFileName(display);
      digests[k] =
          DigestRank(i, ReadRankTrace((*files)[i], display, hint, options.include_last_step, communication_kernels));
    });
  }
  std::vector<RankDigest> all;
  if (exchange->processes() == 1) {
    all = std::move(digests);
  } else {
    auto gathered = exchange->GatherToRoot(SerializeDigests(digests));
    if (!gathered.ok()) return gathered.status();
    for (const auto& bytes : *gathered) {
      report.exchanged_bytes += bytes.size();
      PORTKIT_RETURN_IF_ERROR(DeserializeDigests(bytes, &all));
    }
    if (!report.root) return report;
  }
  std::sort(all.begin(), all.end(),
            [](const RankDigest& a, const RankDigest& b) { return a.file_index < b.file_index; });
  // An empty or broken rank file is skipped with its reason: the other ranks are still analysed.
  std::vector<RankDigest> readable;
  for (auto& d : all) {
    if (d.status.ok()) {
      readable.push_back(std::move(d));
      continue;
    }
    std::error_code ec;
    std::string rel = fs::relative((*files)[d.file_index], options.dir, ec).generic_string();
    report.skipped.emplace_back(ec || rel.empty() ? (*files)[d.file_index].filename().string() : rel,
                                "not read: " + d.status.message());
  }
  std::sort(report.skipped.begin(), report.skipped.end());
  if (readable.empty())
    return all.front().status.code() == ErrorCode::kOk
               ? NotFound(options.dir.string() + ": no readable trace")
               : Status(all.front().status.code(), options.dir.string() + ": no rank trace could be read; the first: " +
                                                       all.front().status.message());
  all = std::move(readable);

  // By rank; two files of one rank are an error naming both.
  std::stable_sort(all.begin(), all.end(),
                   [](const RankDigest& a, const RankDigest& b) { return a.trace.rank < b.trace.rank; });
  for (size_t k = 1; k < all.size(); ++k)
    if (all[k].trace.rank == all[k - 1].trace.rank) {
      const bool assumed = all[k].trace.rank_source == RankSource::kAssumedZero ||
                           all[k - 1].trace.rank_source == RankSource::kAssumedZero;
      return InvalidArgument(options.dir.string() + ": rank " + std::to_string(all[k].trace.rank) +
                             " appears twice: " + all[k - 1].trace.file + " and " + all[k].trace.file +
                             (assumed ? " (a trace without distributedInfo.rank nor a rank in its file name is "
                                        "taken as rank 0; name the files like rank-3.json)"
                                      : "") +
                             "; keep one trace per rank in the folder");
    }
  auto t1 = std::chrono::steady_clock::now();

  std::vector<RankTrace> ranks;
  std::vector<fs::path> rank_files;
  for (auto& d : all) {
    rank_files.push_back((*files)[d.file_index]);
    report.breakdown.push_back(std::move(d.breakdown));
    ranks.push_back(std::move(d.trace));
  }
  report.origin_ns = ranks.front().first_ns;
  for (const auto& r : ranks) report.origin_ns = std::min(report.origin_ns, r.first_ns);
  for (size_t k = 0; k < ranks.size(); ++k) {
    const RankTrace& r = ranks[k];
    RankSummary s;
    s.file = r.file;
    s.rank = r.rank;
    s.world_size = r.world_size;
    s.backend = r.backend;
    s.rank_source = r.rank_source;
    s.offset_ns = r.first_ns - report.origin_ns;
    s.events = r.events;
    s.device_tasks = all[k].device_tasks;
    s.comm_tasks = r.comms.size();
    s.bytes = r.bytes;
    std::vector<std::string> notes;
    if (r.rank_source == RankSource::kFileName)
      notes.push_back("no distributedInfo.rank: rank taken from the file name or torch_npu's profiler_info_N.json");
    if (r.rank_source == RankSource::kAssumedZero)
      notes.push_back("no rank in the trace nor in its file name: taken as rank 0");
    if (r.world_size > 0 && r.rank >= r.world_size)
      notes.push_back("rank " + std::to_string(r.rank) + " is not below the world size " +
                      std::to_string(r.world_size));
    if (r.relative_clock)
      notes.push_back(
          "legacy profiler trace (torch without Kineto): times count from its own profiler's start, not "
          "aligned with the other ranks");
    if (r.host_with_stream)
      notes.push_back(
          std::to_string(r.host_with_stream) +
          " host event(s) with a stream field (kernel launchers such as Triton's) not counted as device time");
    if (!r.has_base_time && !r.relative_clock) notes.push_back("no baseTimeNanoseconds: timestamps taken as absolute");
    if (r.truncated) notes.push_back("truncated trace: the events before the damage were read");
    if (r.world_size > 0 && static_cast<size_t>(r.world_size) != ranks.size())
      notes.push_back("world size " + std::to_string(r.world_size) + ", " + std::to_string(ranks.size()) +
                      " rank(s) in the folder");
    if (r.excluded_tasks)
      notes.push_back(std::to_string(r.excluded_tasks) +
                      " device task(s) launched in the last (incomplete) step or with no launch left out");
    for (const auto& n : notes) s.warning += (s.warning.empty() ? "" : "; ") + n;
    report.ranks.push_back(std::move(s));
  }
  uint64_t device_tasks = 0;
  for (const auto& s : report.ranks) device_tasks += s.device_tasks;
  if (device_tasks == 0)
    report.notes.push_back(
        "No rank has device tasks (kernels, memcpy, memset): a CPU-only run (for example gloo on CPU), so the "
        "device time split, overlap, slow-rank checks and collectives below are empty; the host operators of a rank "
        "are in `portkit prof import` + `prof analyse` of its trace");
  const bool legacy = std::any_of(ranks.begin(), ranks.end(), [](const RankTrace& r) { return r.relative_clock; });
  if (legacy && ranks.size() > 1)
    report.notes.push_back(
        "Some ranks are legacy profiler traces (torch without Kineto), whose times count from each process's own "
        "profiler start: their offsets and cross-rank waits are not comparable");
  report.slow_ranks = FindSlowRanks(report.breakdown);
  report.communication = AnalyseCommunication(ranks);
  std::map<std::pair<int64_t, int64_t>, const StepSplit*> rows;
  for (const auto& b : report.breakdown)
    for (const auto& s : b.steps) rows[{s.step, b.rank}] = &s;
  for (const auto& [key, s] : rows) report.step_trace.push_back({key.first, key.second, s->preparing, s->split});
  if (options.timeline) {
    auto json = BuildMergedTimeline(rank_files, ranks, report.origin_ns, &report.timeline_events);
    if (!json.ok()) return json.status();
    report.timeline_json = std::move(*json);
  }
  auto t2 = std::chrono::steady_clock::now();
  report.seconds_reading = std::chrono::duration<double>(t1 - t0).count();
  report.seconds_analysing = std::chrono::duration<double>(t2 - t1).count();
  ctx.logger.Info("Read " + std::to_string(ranks.size()) + " rank(s) from " + options.dir.string() +
                  (report.processes > 1
                       ? " with " + std::to_string(report.processes) + " MPI processes (" +
                             std::to_string(report.exchanged_bytes) + " bytes of rank digests gathered)"
                       : ""));
  return report;
}

}  // namespace portkit::prof::cluster
