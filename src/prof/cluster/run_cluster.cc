// `prof cluster`: find the ranks of a folder, read them (in parallel), align them on absolute
// time and run the analyses.
#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>

#include "core/thread_pool.h"
#include "prof/cluster/cluster.h"

namespace portkit::prof::cluster {
namespace fs = std::filesystem;

Expected<ClusterReport> RunCluster(const ClusterOptions& options, Context& ctx) {
  ClusterReport report;
  report.dir = options.dir;
  auto files = FindRankFiles(options.dir, &report.skipped);
  if (!files.ok()) return files.status();
  if (files->empty())
    return NotFound(options.dir.string() + ": no Kineto trace found (" + std::to_string(report.skipped.size()) +
                    " other files); give the folder holding one trace per rank");

  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> display(files->size());
  std::vector<Expected<RankTrace>> read(files->size(), Expected<RankTrace>(Status(ErrorCode::kInternal, "not read")));
  for (size_t i = 0; i < files->size(); ++i) {
    std::error_code ec;
    std::string rel = fs::relative((*files)[i], options.dir, ec).string();
    display[i] = ec || rel.empty() ? (*files)[i].filename().string() : rel;
  }
  {
    ThreadPool pool(std::min<int>(ctx.jobs > 0 ? ctx.jobs : ThreadPool::DefaultThreads(),
                                  static_cast<int>(files->size())));
    pool.ParallelFor(files->size(), [&](int, size_t i) {
      int64_t hint = RankFromFileName((*files)[i].filename().string());
      if (hint < 0) hint = RankFromFileName(display[i]);
      read[i] = ReadRankTrace((*files)[i], display[i], hint, options.include_last_step);
    });
  }
  std::vector<RankTrace> ranks;
  std::vector<fs::path> rank_files;
  for (size_t i = 0; i < read.size(); ++i) {
    if (!read[i].ok()) return read[i].status();
    ranks.push_back(std::move(*read[i]));
    rank_files.push_back((*files)[i]);
  }
  // By rank; two files of one rank are an error naming both.
  std::vector<size_t> order(ranks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranks[a].rank < ranks[b].rank; });
  for (size_t k = 1; k < order.size(); ++k)
    if (ranks[order[k]].rank == ranks[order[k - 1]].rank)
      return InvalidArgument(options.dir.string() + ": rank " + std::to_string(ranks[order[k]].rank) +
                             " appears twice: " + ranks[order[k - 1]].file + " and " + ranks[order[k]].file +
                             "; keep one trace per rank in the folder");
  {
    std::vector<RankTrace> sorted;
    std::vector<fs::path> sorted_files;
    for (size_t i : order) sorted.push_back(std::move(ranks[i])), sorted_files.push_back(rank_files[i]);
    ranks = std::move(sorted);
    rank_files = std::move(sorted_files);
  }
  auto t1 = std::chrono::steady_clock::now();

  report.origin_ns = ranks.front().first_ns;
  for (const auto& r : ranks) report.origin_ns = std::min(report.origin_ns, r.first_ns);
  for (const auto& r : ranks) {
    RankSummary s;
    s.file = r.file;
    s.rank = r.rank;
    s.world_size = r.world_size;
    s.backend = r.backend;
    s.rank_from_file_name = r.rank_from_file_name;
    s.offset_ns = r.first_ns - report.origin_ns;
    s.events = r.events;
    s.device_tasks = r.tasks.size();
    s.comm_tasks = r.comms.size();
    s.bytes = r.bytes;
    std::vector<std::string> notes;
    if (r.rank_from_file_name) notes.push_back("no distributedInfo.rank: rank taken from the file name");
    if (!r.has_base_time) notes.push_back("no baseTimeNanoseconds: timestamps taken as absolute");
    if (r.truncated) notes.push_back("truncated trace: the events before the damage were read");
    if (r.world_size > 0 && static_cast<size_t>(r.world_size) != ranks.size())
      notes.push_back("world size " + std::to_string(r.world_size) + ", " + std::to_string(ranks.size()) +
                      " rank(s) in the folder");
    if (r.excluded_tasks)
      notes.push_back(std::to_string(r.excluded_tasks) +
                      " device task(s) launched in the last (incomplete) step or with no launch left out");
    for (const auto& n : notes) s.warning += (s.warning.empty() ? "" : "; ") + n;
    report.ranks.push_back(std::move(s));
    report.breakdown.push_back(ComputeRankBreakdown(r));
  }
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
  ctx.logger.Info("Read " + std::to_string(ranks.size()) + " rank(s) from " + options.dir.string());
  return report;
}

}  // namespace portkit::prof::cluster
