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
namespace {

/// The name fragments of communication tasks: the options', else the target's data (HCCL's on
/// the NPU). Without data for the default target only NCCL's and RCCL's kernels are known; a
/// target named in the options must load.
Expected<std::vector<std::string>> CommunicationKernels(const ClusterOptions& options, Context& ctx) {
  if (!options.communication_kernels.empty()) return options.communication_kernels;
  auto facts = target::LoadTarget(ctx.data_dir, options.target);
  if (facts.ok()) return facts->profile.communication_kernels;
  if (!options.target.empty()) return facts.status();
  return std::vector<std::string>{};
}

/// `file` relative to the input folder, else its name.
std::string DisplayName(const fs::path& file, const fs::path& dir, bool generic) {
  std::error_code ec;
  fs::path rel = fs::relative(file, dir, ec);
  std::string text = generic ? rel.generic_string() : rel.string();
  return ec || text.empty() ? file.filename().string() : text;
}

/// Reads and reduces this process's share of the files (p, p + P, p + 2P, ...) in threads.
std::vector<RankDigest> DigestOwnShare(const std::vector<fs::path>& files, const ClusterOptions& options,
                                       const std::vector<std::string>& communication_kernels, Exchange& exchange,
                                       Context& ctx) {
  std::vector<size_t> mine;
  for (size_t i = static_cast<size_t>(exchange.process()); i < files.size();
       i += static_cast<size_t>(exchange.processes()))
    mine.push_back(i);
  std::vector<RankDigest> digests(mine.size());
  ThreadPool pool(std::max(
      1, std::min<int>(ctx.jobs > 0 ? ctx.jobs : ThreadPool::DefaultThreads(), static_cast<int>(mine.size()))));
  pool.ParallelFor(mine.size(), [&](int, size_t k) {
    const fs::path& file = files[mine[k]];
    std::string display = DisplayName(file, options.dir, false);
    int64_t hint = RankFromAscendFolder(file, options.dir);
    if (hint < 0) hint = RankFromFileName(file.filename().string());
    if (hint < 0) hint = RankFromFileName(display);
    digests[k] =
        DigestRank(mine[k], ReadRankTrace(file, display, hint, options.include_last_step, communication_kernels));
  });
  return digests;
}

/// Every process's digests on process 0, in file order (the other processes get none); the
/// bytes exchanged go to the report.
Status GatherDigests(std::vector<RankDigest> mine, Exchange& exchange, ClusterReport& report,
                     std::vector<RankDigest>* all) {
  if (exchange.processes() == 1) {
    *all = std::move(mine);
  } else {
    auto gathered = exchange.GatherToRoot(SerializeDigests(mine));
    if (!gathered.ok()) return gathered.status();
    for (const auto& bytes : *gathered) {
      report.exchanged_bytes += bytes.size();
      PORTKIT_RETURN_IF_ERROR(DeserializeDigests(bytes, all));
    }
  }
  std::sort(all->begin(), all->end(),
            [](const RankDigest& a, const RankDigest& b) { return a.file_index < b.file_index; });
  return Status::Ok();
}

/// Leaves out the ranks that could not be read, each skipped with its reason: the other ranks are
/// still analysed. An error when none is left.
Status KeepReadable(const std::vector<fs::path>& files, const ClusterOptions& options, ClusterReport& report,
                    std::vector<RankDigest>* all) {
  std::vector<RankDigest> readable;
  for (auto& d : *all) {
    if (d.status.ok()) {
      readable.push_back(std::move(d));
      continue;
    }
    report.skipped.emplace_back(DisplayName(files[d.file_index], options.dir, true), "not read: " + d.status.message());
  }
  std::sort(report.skipped.begin(), report.skipped.end());
  if (readable.empty())
    return all->front().status.code() == ErrorCode::kOk
               ? NotFound(options.dir.string() + ": no readable trace")
               : Status(all->front().status.code(),
                        options.dir.string() +
                            ": no rank trace could be read; the first: " + all->front().status.message());
  *all = std::move(readable);
  return Status::Ok();
}

/// Sorts the ranks by rank; two files of one rank are an error naming both.
Status SortByRank(const fs::path& dir, std::vector<RankDigest>& all) {
  std::stable_sort(all.begin(), all.end(),
                   [](const RankDigest& a, const RankDigest& b) { return a.trace.rank < b.trace.rank; });
  for (size_t k = 1; k < all.size(); ++k) {
    const RankTrace& a = all[k - 1].trace;
    const RankTrace& b = all[k].trace;
    if (b.rank != a.rank) continue;
    const bool assumed = b.rank_source == RankSource::kAssumedZero || a.rank_source == RankSource::kAssumedZero;
    return InvalidArgument(dir.string() + ": rank " + std::to_string(b.rank) + " appears twice: " + a.file + " and " +
                           b.file +
                           (assumed ? " (a trace without distributedInfo.rank nor a rank in its file name is "
                                      "taken as rank 0; name the files like rank-3.json)"
                                    : "") +
                           "; keep one trace per rank in the folder");
  }
  return Status::Ok();
}

/// What the report says about rank `r` of a folder of `ranks` ranks, "; "-separated.
std::string RankWarning(const RankTrace& r, size_t ranks) {
  std::vector<std::string> notes;
  if (r.rank_source == RankSource::kFileName)
    notes.push_back("no distributedInfo.rank: rank taken from the file name or torch_npu's profiler_info_N.json");
  if (r.rank_source == RankSource::kAssumedZero)
    notes.push_back("no rank in the trace nor in its file name: taken as rank 0");
  if (r.world_size > 0 && r.rank >= r.world_size)
    notes.push_back("rank " + std::to_string(r.rank) + " is not below the world size " + std::to_string(r.world_size));
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
  if (r.world_size > 0 && static_cast<size_t>(r.world_size) != ranks)
    notes.push_back("world size " + std::to_string(r.world_size) + ", " + std::to_string(ranks) +
                    " rank(s) in the folder");
  if (r.excluded_tasks)
    notes.push_back(std::to_string(r.excluded_tasks) +
                    " device task(s) launched in the last (incomplete) step or with no launch left out");
  std::string warning;
  for (const auto& n : notes) warning += (warning.empty() ? "" : "; ") + n;
  return warning;
}

RankSummary SummariseRank(const RankTrace& r, uint64_t device_tasks, int64_t origin_ns, size_t ranks) {
  RankSummary s;
  s.file = r.file;
  s.rank = r.rank;
  s.world_size = r.world_size;
  s.backend = r.backend;
  s.rank_source = r.rank_source;
  s.offset_ns = r.first_ns - origin_ns;
  s.events = r.events;
  s.device_tasks = device_tasks;
  s.comm_tasks = r.comms.size();
  s.bytes = r.bytes;
  s.warning = RankWarning(r, ranks);
  return s;
}

/// Notes about the whole run: no device tasks at all, ranks on clocks of their own.
void AddRunNotes(const std::vector<RankTrace>& ranks, ClusterReport& report) {
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
}

/// The cross-rank analyses of the ranks (sorted by rank) into the report.
Status AnalyseRanks(const ClusterOptions& options, const std::vector<fs::path>& files, std::vector<RankDigest> all,
                    ClusterReport& report) {
  std::vector<RankTrace> ranks;
  std::vector<fs::path> rank_files;
  std::vector<uint64_t> device_tasks;
  for (auto& d : all) {
    rank_files.push_back(files[d.file_index]);
    report.breakdown.push_back(std::move(d.breakdown));
    ranks.push_back(std::move(d.trace));
    device_tasks.push_back(d.device_tasks);
  }
  report.origin_ns = ranks.front().first_ns;
  for (const auto& r : ranks) report.origin_ns = std::min(report.origin_ns, r.first_ns);
  for (size_t k = 0; k < ranks.size(); ++k)
    report.ranks.push_back(SummariseRank(ranks[k], device_tasks[k], report.origin_ns, ranks.size()));
  AddRunNotes(ranks, report);
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
  return Status::Ok();
}

}  // namespace

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
  auto communication_kernels = CommunicationKernels(options, ctx);
  if (!communication_kernels.ok()) return communication_kernels.status();

  auto t0 = std::chrono::steady_clock::now();
  std::vector<RankDigest> all;
  PORTKIT_RETURN_IF_ERROR(
      GatherDigests(DigestOwnShare(*files, options, *communication_kernels, *exchange, ctx), *exchange, report, &all));
  if (!report.root) return report;
  PORTKIT_RETURN_IF_ERROR(KeepReadable(*files, options, report, &all));
  PORTKIT_RETURN_IF_ERROR(SortByRank(options.dir, all));
  auto t1 = std::chrono::steady_clock::now();
  PORTKIT_RETURN_IF_ERROR(AnalyseRanks(options, *files, std::move(all), report));
  auto t2 = std::chrono::steady_clock::now();
  report.seconds_reading = std::chrono::duration<double>(t1 - t0).count();
  report.seconds_analysing = std::chrono::duration<double>(t2 - t1).count();
  ctx.logger.Info("Read " + std::to_string(report.ranks.size()) + " rank(s) from " + options.dir.string() +
                  (report.processes > 1
                       ? " with " + std::to_string(report.processes) + " MPI processes (" +
                             std::to_string(report.exchanged_bytes) + " bytes of rank digests gathered)"
                       : ""));
  return report;
}

}  // namespace portkit::prof::cluster
