#pragma once
/// `prof cluster`: analysis of a multi-rank job from a folder of per-rank traces (Kineto JSON with
/// `distributedInfo` and `baseTimeNanoseconds`). Ranks are aligned on absolute time; the report
/// holds the per-rank and per-step temporal breakdown (HTA's definitions), the
/// communication/computation overlap and exposed communication, slow ranks (msprof-analyze's
/// rule), per-collective effective bandwidth, the communication matrix, slow links, the step
/// trace across ranks and a merged timeline with one process per rank.
///
/// One file per unit: rank_trace.cc (reading one rank), rank_files.cc (finding the ranks of a
/// folder), temporal_breakdown.cc, slow_rank.cc, communication.cc, merged_timeline.cc,
/// run_cluster.cc (the entry point). All times are integer nanoseconds; absolute times are
/// nanoseconds since the epoch (baseTimeNanoseconds + ts, or ts itself when the trace writes
/// absolute microseconds).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/status.h"

namespace portkit::prof::cluster {

/// What a device task is, with HTA's kernel classes: communication (`nccl...Kernel`, or a kernel
/// with collective arguments), memory (`Memcpy...`, `Memset...`, `dma...`), other (names holding
/// "Sync": the stream / event syncs Kineto puts on the device timeline) and computation
/// (everything else on the device).
enum class TaskClass : uint8_t { kCompute, kCommunication, kMemory, kOther };
const char* TaskClassName(TaskClass c);

/// One device task (kernel, memcpy, memset) of a rank.
struct DeviceTask {
  int64_t start = 0, end = 0;  ///< absolute ns
  int64_t stream = -1;
  int64_t correlation = -1;  ///< links it to the runtime call that launched it
  int32_t name = 0;          ///< index into RankTrace::names
  TaskClass cls = TaskClass::kCompute;
  bool receive = false;  ///< a receive (recv / irecv): pipeline bubbles in msprof's step trace
  int32_t step = -1;     ///< index into RankTrace::steps (-1: launched outside every step)
};

/// The arguments Kineto records on a collective kernel (absent ones are -1 / empty).
struct CollectiveArgs {
  std::string op;           ///< "Collective name" (allreduce, send, ...), else from the kernel name
  std::string group;        ///< "Process Group Name"
  std::string group_ranks;  ///< "Process Group Ranks" as written ("[0, 1]")
  std::string dtype;
  int64_t in_nelems = -1, out_nelems = -1, group_size = -1;
  int64_t src_rank = -1, dst_rank = -1;
};

/// One communication task of a rank, with its arguments.
struct CommTask {
  size_t task = 0;  ///< index into RankTrace::tasks
  CollectiveArgs args;
  /// Bytes moved: max(in, out) elements × the element size of dtype; -1 when not recorded.
  int64_t Bytes() const;
};

/// A step (ProfilerStep#N) of a rank, on the host.
struct RankStep {
  int64_t number = 0;                  ///< N of ProfilerStep#N
  int64_t cpu_start = 0, cpu_end = 0;  ///< absolute ns
};

/// Where a rank's number came from.
enum class RankSource : uint8_t {
  kDistributedInfo,  ///< the trace's distributedInfo.rank
  kFileName,         ///< torch_npu's profiler_info_N.json, or the file name (rank-3, rank_3, rank3)
  kAssumedZero,      ///< neither: taken as rank 0, as HTA does
};

/// What the analysis keeps of one rank's trace.
struct RankTrace {
  std::string file;  ///< relative to the input folder
  int64_t rank = -1;
  int64_t world_size = -1;
  std::string backend;
  RankSource rank_source = RankSource::kDistributedInfo;
  bool has_base_time = false;  ///< baseTimeNanoseconds present (ts relative to it)
  /// An event array (the legacy profiler of torch builds without Kineto): its timestamps count
  /// from its own profiler's start, so it cannot be aligned with other ranks on absolute time.
  bool relative_clock = false;
  uint64_t host_with_stream = 0;  ///< host events with a stream field, not counted as device time
  int64_t base_ns = 0;
  int64_t first_ns = 0, last_ns = 0;  ///< absolute span of the trace's timed events
  uint64_t events = 0, bytes = 0;
  bool truncated = false;
  std::vector<std::string> names;  ///< device task names
  std::vector<DeviceTask> tasks;   ///< sorted by start
  std::vector<CommTask> comms;     ///< in start order
  std::vector<RankStep> steps;     ///< sorted by start
  /// Device tasks left out as HTA leaves them out: launched at or after the start of the last
  /// step (an incomplete step), or with no launch on the host. Only when there are 2+ steps.
  uint64_t excluded_tasks = 0;
};

/// Reads one rank's trace (plain or gzip Kineto JSON). `rank_hint` is the rank taken from the
/// file name (-1: none), used when the trace has no distributedInfo.rank. Errors name the file.
/// With `include_last_step`, tasks launched during the last step are kept (HTA's
/// include_last_profiler_step).
/// `communication_kernels`: substrings of device task names that mark communication, besides
/// HTA's `nccl...Kernel` / `rccl...Kernel` (the target's profile.communication_kernels).
Expected<RankTrace> ReadRankTrace(const std::filesystem::path& path, const std::string& display, int64_t rank_hint,
                                  bool include_last_step = false,
                                  const std::vector<std::string>& communication_kernels = {});

/// The rank in a file name ("rank-3", "rank_3", "rank3", case-insensitive), or -1.
int64_t RankFromFileName(const std::string& name);
/// torch_npu's rank: N of a `profiler_info_N.json` in the file's folder or a parent (up to
/// `dir`), as its profiler writes in each `*_ascend_pt` folder; -1 when there is none.
int64_t RankFromAscendFolder(const std::filesystem::path& file, const std::filesystem::path& dir);

/// The default output folder inside the input folder (msprof-analyze's name); never read as input.
inline constexpr const char* kClusterOutputFolder = "cluster_analysis_output";

/// The trace files of `dir` (searched recursively, sorted by path, kClusterOutputFolder and
/// portkit's marked output folders skipped): every file whose content starts like a Kineto trace
/// object or a torch_npu trace_view.json (an event array with string timestamps; its device
/// tasks are the events with a "Stream Id", HCCL's `hcom_` tasks communication). `skipped` gets
/// the other files (relative path, why).
Expected<std::vector<std::filesystem::path>> FindRankFiles(const std::filesystem::path& dir,
                                                           std::vector<std::pair<std::string, std::string>>* skipped);

// ---- analysis ---------------------------------------------------------------------------------

/// Time split of one window of a rank's device timeline (HTA's temporal breakdown).
struct TimeSplit {
  int64_t window = 0;           ///< the window's length
  int64_t busy = 0;             ///< union of every device task
  int64_t compute = 0;          ///< union of computation tasks
  int64_t communication = 0;    ///< union of communication tasks
  int64_t memory = 0;           ///< union of memcpy / memset tasks
  int64_t overlapped = 0;       ///< communication time during which computation also ran
  int64_t receive = 0;          ///< union of receive tasks (msprof's Bubble)
  int64_t receive_exposed = 0;  ///< receive time with no computation
  /// HTA's idle time: no device task at all.
  int64_t idle() const { return window - busy; }
  /// msprof's Free: neither computation nor communication (memory copies count as free).
  int64_t free() const { return window - (compute + communication - overlapped); }
  /// HTA's non-compute time: busy time with no computation (communication and memory).
  int64_t non_compute() const { return busy - compute; }
  /// Communication not hidden behind computation.
  int64_t exposed_communication() const { return communication - overlapped; }
};

/// The time split of `tasks` (sorted by start) inside [from, to).
TimeSplit SplitWindow(const std::vector<DeviceTask>& tasks, int64_t from, int64_t to);

/// One step of one rank on the device: the tasks launched in the step.
struct StepSplit {
  int64_t step = 0;            ///< the step number (ProfilerStep#N)
  int64_t start = 0, end = 0;  ///< absolute ns: first task of the step to the first task of the next
  int64_t preparing = 0;       ///< from the step's start on the host to its first device task
  TimeSplit split;
};

struct RankBreakdown {
  int64_t rank = 0;
  /// The whole trace: from the first device task to the end of the last (HTA's kernel run time).
  TimeSplit total;
  std::vector<StepSplit> steps;
};

/// HTA's temporal breakdown of a rank, in total and per step.
RankBreakdown ComputeRankBreakdown(const RankTrace& trace);

/// msprof-analyze's slow-rank rule for one step and one quantity.
struct SlowRankCheck {
  int64_t step = 0;
  std::string quantity;  ///< compute, communication, free
  int64_t min = 0, max = 0;
  double mean = 0;
  double ratio = 0;      ///< (max - min) / mean
  bool slow = false;     ///< ratio > kSlowRankRatio
  int64_t suspect = -1;  ///< the rank to look at: most compute / free time, least communication
};
inline constexpr double kSlowRankRatio = 0.05;

/// The slow-rank checks of every step that all ranks have (compute, communication, free).
std::vector<SlowRankCheck> FindSlowRanks(const std::vector<RankBreakdown>& ranks);

/// One collective (or point-to-point transfer) as seen by one rank.
struct CollectiveRank {
  int64_t rank = 0;
  int64_t start = 0, end = 0;  ///< absolute ns
  int64_t wait = 0;            ///< from this rank's start to the last rank's start
  int64_t transit = 0;         ///< from the last rank's start to this rank's end
  int64_t bytes = -1;
  double bandwidth_gbps = -1;  ///< bytes / transit in GB/s (1e9 bytes); -1 without bytes
};

/// One collective across ranks: the n-th task of the same operation in the same group on each rank.
struct Collective {
  std::string op, group, kernel;
  int64_t index = 0;  ///< its ordinal among the collectives of that op and group
  int64_t step = -1;  ///< the step of its first rank
  std::vector<CollectiveRank> ranks;
  int64_t Duration() const;  ///< from the first start to the last end
};

/// A link of the communication matrix: traffic from `src` to `dst` for one operation.
struct MatrixLink {
  std::string op;
  int64_t src = 0, dst = 0;
  int64_t count = 0, bytes = 0, transit = 0;
  double bandwidth_gbps = -1;   ///< bytes / transit
  bool point_to_point = false;  ///< src/dst recorded; otherwise the ring neighbour in the group
  bool slow = false;
};

struct CommunicationReport {
  std::vector<Collective> collectives;
  std::vector<MatrixLink> matrix;
  /// Links below kSlowLinkRatio × the median bandwidth of the same operation.
  size_t slow_links = 0;
};
inline constexpr double kSlowLinkRatio = 0.8;

/// Matches the communication tasks of the ranks, computes wait / transit / bandwidth, and the
/// communication matrix.
CommunicationReport AnalyseCommunication(const std::vector<RankTrace>& ranks);

/// msprof-analyze's cluster_step_trace_time rows: one per step and rank.
struct StepTraceRow {
  int64_t step = 0, rank = 0;
  int64_t preparing = 0;
  TimeSplit split;
};

// ---- sharing the ranks among processes ----------------------------------------------------------

/// How the ranks are shared among processes: one process (the default), or the processes of an
/// MPI job (`mpirun -np N portkit prof cluster ...`, when portkit is built with MPI): process p
/// reads and reduces the files p, p + N, p + 2N, ...; the reductions are gathered on process 0,
/// which runs the cross-rank analyses and writes the reports.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual int process() const = 0;
  virtual int processes() const = 0;
  /// Process 0 gets every process's `mine`, in process order; the others get an empty list.
  virtual Expected<std::vector<std::string>> GatherToRoot(const std::string& mine) = 0;
  /// Every process gets process 0's `value`.
  virtual int Broadcast(int value) = 0;
};

/// One process, no MPI.
std::unique_ptr<Exchange> MakeSingleProcessExchange();
/// MPI's processes when portkit is built with MPI (PORTKIT_WITH_MPI) and was started by mpirun
/// (MPI is initialised here and finalised with the returned object); one process otherwise.
std::unique_ptr<Exchange> MakeExchange();
/// Whether this portkit was built with MPI.
bool BuiltWithMpi();

/// What one rank reduces to before the cross-rank analyses: its summary, its breakdown and its
/// trace with only the communication tasks (what AnalyseCommunication reads). Serialised to move
/// between processes; the single-process run goes through the same reduction.
struct RankDigest {
  size_t file_index = 0;
  Status status;    ///< not ok: the file could not be read (the rest is empty)
  RankTrace trace;  ///< tasks: the communication tasks only
  RankBreakdown breakdown;
  uint64_t device_tasks = 0;
};
RankDigest DigestRank(size_t file_index, Expected<RankTrace> read);
std::string SerializeDigests(const std::vector<RankDigest>& digests);
/// Errors (kInternal) when `bytes` is not what SerializeDigests wrote.
Status DeserializeDigests(std::string_view bytes, std::vector<RankDigest>* out);

// ---- the command ------------------------------------------------------------------------------

struct ClusterOptions {
  std::filesystem::path dir;       ///< the folder of per-rank traces
  bool timeline = true;            ///< build the merged timeline
  bool include_last_step = false;  ///< keep the last (often incomplete) step, see ReadRankTrace
  Exchange* exchange = nullptr;    ///< null: one process
  /// Substrings of device task names that are communication (besides NCCL's and RCCL's kernels);
  /// empty: profile.communication_kernels of `target`.
  std::vector<std::string> communication_kernels;
  /// The target whose data names the communication tasks: a name of the Context's data folders or
  /// a folder holding a target.json; empty: the default target (none found: NCCL's and RCCL's
  /// kernels only). A named target that cannot be loaded is an error.
  std::string target;
};

struct RankSummary {
  std::string file;
  int64_t rank = 0, world_size = -1;
  std::string backend;
  RankSource rank_source = RankSource::kDistributedInfo;
  int64_t offset_ns = 0;  ///< its first event after the earliest rank's first event
  uint64_t events = 0, device_tasks = 0, comm_tasks = 0, bytes = 0;
  std::string warning;
};

struct ClusterReport {
  std::filesystem::path dir;
  int64_t origin_ns = 0;                 ///< the earliest first event of all ranks (absolute ns)
  std::vector<RankSummary> ranks;        ///< by rank
  std::vector<RankBreakdown> breakdown;  ///< by rank
  std::vector<SlowRankCheck> slow_ranks;
  CommunicationReport communication;
  std::vector<StepTraceRow> step_trace;                      ///< by step, then rank
  std::vector<std::pair<std::string, std::string>> skipped;  ///< files that are no trace, or unreadable
  /// Notes about the whole run, printed before the tables: a run without device tasks (CPU only),
  /// ranks on their own clocks.
  std::vector<std::string> notes;
  std::string timeline_json;  ///< empty when not asked for
  uint64_t timeline_events = 0;
  double seconds_reading = 0, seconds_analysing = 0;
  /// False on the processes of an MPI job other than 0: they hold no report and write nothing.
  bool root = true;
  int processes = 1;
  uint64_t exchanged_bytes = 0;  ///< rank digests gathered on process 0 (MPI only)
};

/// Reads every rank of options.dir and analyses them. Errors: the folder holds no trace
/// (kNotFound), two traces claim one rank (kInvalidArgument, naming both), a trace has no rank
/// in distributedInfo nor in its file name (kInvalidArgument, naming it), a trace cannot be read
/// (its error), options.target cannot be loaded (its error).
Expected<ClusterReport> RunCluster(const ClusterOptions& options, Context& ctx);

/// The merged timeline: every event of every rank, one process per rank (pid = rank), times
/// shifted to `origin_ns`, sorted by time. Streams the files again.
Expected<std::string> BuildMergedTimeline(const std::vector<std::filesystem::path>& files,
                                          const std::vector<RankTrace>& ranks, int64_t origin_ns, uint64_t* events);

}  // namespace portkit::prof::cluster
