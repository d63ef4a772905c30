#pragma once
/// The profiling engine as a library: collect a profile, import traces into a store, export
/// summaries and timelines, run the advisor, diff two profiles. Each entry point takes an options
/// struct and the run's Context and returns data (or an error); none reads argv, writes to stdout
/// or picks an exit code: the command line (src/cli/prof.cc) and the renderers
/// (src/render/prof_*.h) do that. Progress goes to ctx.logger.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/status.h"
#include "core/subprocess.h"
#include "prof/advisor/advisor.h"
#include "prof/diff.h"
#include "prof/exporters/summary.h"
#include "prof/exporters/timeline.h"
#include "prof/importers/importer.h"

namespace portkit::prof {

/// The profile folder of `path` (the folder itself, or a file's folder) and its store.
std::filesystem::path ProfileFolder(const std::filesystem::path& path);
std::filesystem::path StorePath(const std::filesystem::path& path);

// ---- import ----------------------------------------------------------------------------------

struct ImportOptions {
  /// A PROF_<timestamp> folder, any folder of traces (searched recursively) or one trace file.
  std::filesystem::path input;
  /// Caps on one trace (docs/safety.md, Limits): the largest event/member/row, gzip expansion.
  ImportLimits limits;
};

struct ImportedTrace {
  std::string path;      ///< relative to the profile folder
  std::string importer;  ///< the importer that recognised the content
  Status status;         ///< not ok: this file failed (nothing of it stored)
  ImportResult result;   ///< valid when status is ok
  double seconds = 0;
};

struct ImportReport {
  std::filesystem::path folder;    ///< the profile folder
  std::filesystem::path database;  ///< folder / portkit.db
  std::vector<ImportedTrace> traces;
  /// Files under the input that no importer recognised: (relative path, why), for notes.
  std::vector<std::pair<std::string, std::string>> skipped;
  /// Traces of an earlier import whose files are gone: removed from the store (folder imports).
  std::vector<std::string> dropped;
  /// Stored traces with the same content as another stored trace under another name:
  /// (the copy, the trace it repeats); each is warned about (its events count twice).
  std::vector<std::pair<std::string, std::string>> duplicates;
  /// The first failed trace's status (ok when every trace was imported).
  Status FirstFailure() const;
};

/// A `prof import` into a profile folder that has not ended: its marker
/// `<folder>/.portkit-import.<pid>` lists the traces it had not imported yet. RunImport writes
/// the marker before the first trace, rewrites it after each one and removes it at the end, so a
/// marker whose process is gone is an import that was killed (docs/safety.md, Crash markers).
struct UnfinishedImport {
  long pid = 0;
  bool running = false;              ///< that process still exists (an import in progress)
  std::vector<std::string> pending;  ///< traces it never imported (relative to the folder)
};
/// The unfinished imports of a profile folder, by pid.
std::vector<UnfinishedImport> UnfinishedImports(const std::filesystem::path& folder);
/// One warning line per unfinished import ("... did not finish ...; not imported: a, b").
std::vector<std::string> UnfinishedImportWarnings(const std::filesystem::path& folder);

/// Imports every trace found under options.input into `<folder>/portkit.db`. Errors: the input
/// does not exist (kNotFound), holds no trace (kNotFound; a single file that is no trace:
/// kParse), or the store cannot be opened or has another schema (kUnsupported). A trace that
/// fails is reported in its ImportedTrace; the others are still imported.
Expected<ImportReport> RunImport(const ImportOptions& options, Context& ctx);

// ---- export ----------------------------------------------------------------------------------

struct ExportOptions {
  std::filesystem::path dir;  ///< an imported profile folder (holding portkit.db)
  /// The longest string read from the store (`--max-string-mb`; docs/safety.md, Limits).
  int64_t max_string_bytes = kDefaultMaxStoredValueBytes;
};

struct SummaryReport {
  std::filesystem::path folder;
  std::vector<SummaryTable>
      tables;  ///< op_summary, op_statistic, api_statistic, kernel_statistic, step_trace, host_op_summary
};
Expected<SummaryReport> RunExportSummary(const ExportOptions& options, Context& ctx);

struct TimelineReport {
  std::filesystem::path folder;
  std::string json;  ///< the Chrome-trace JSON text (empty when written to a file as it was built)
  TimelineStats stats;
};
Expected<TimelineReport> RunExportTimeline(const ExportOptions& options, Context& ctx);
/// The timeline written to `output` as it is built (atomically: a temporary beside it, renamed
/// into place once complete; its folder is created), never held whole in memory; `json` stays
/// empty.
Expected<TimelineReport> RunExportTimelineTo(const ExportOptions& options, const std::filesystem::path& output,
                                             Context& ctx);

// ---- analyse (advisor) -----------------------------------------------------------------------

struct AnalyseOptions {
  std::filesystem::path dir;
  size_t top = 10;                                         ///< rows in the top operators / device tasks lists
  int64_t max_string_bytes = kDefaultMaxStoredValueBytes;  ///< as ExportOptions
  /// The target whose facts the rules read (non-native operators, communication kernels, fused
  /// APIs): a name of data/targets or a folder holding a target.json; empty: the default target.
  std::string target;
};

struct AnalyseReport {
  std::filesystem::path folder;
  Breakdown breakdown;
  std::vector<std::pair<std::string, int64_t>> time_split;        ///< (what, ns)
  std::vector<std::pair<std::string, int64_t>> top_operators;     ///< (name, total ns)
  std::vector<std::pair<std::string, int64_t>> top_device_tasks;  ///< (name, total ns)
  /// The host operators with the most self time (count, self, total), at most `top`.
  std::vector<HostOpStat> host_ops;
  std::vector<AdvisorFinding> findings;  ///< most severe first
  /// Findings at `at_least` or more severe.
  size_t CountAtLeast(Severity at_least) const;
};
Expected<AnalyseReport> RunAnalyse(const AnalyseOptions& options, Context& ctx);

// ---- diff ------------------------------------------------------------------------------------

/// How `--fail-above` judges a slowdown (docs/prof.md, "Noise-aware gate").
enum class DiffGate {
  kSignificant,  ///< the step work change is above the limit and its interval all above 0
  kInterval,     ///< the lower bound of the step work change's interval is above the limit
  kPoint,        ///< the mean step change is above the limit (no noise model: noise trips it)
};

struct DiffOptions {
  std::filesystem::path base, compare;  ///< profile folders; imported first when not yet
  /// The regression gate: the step time may grow by at most this percentage.
  std::optional<double> fail_above_percent;
  int64_t max_string_bytes = kDefaultMaxStoredValueBytes;  ///< as ExportOptions
  /// More runs of each side (profile folders, imported first when not yet), pooled with `base`
  /// and `compare`: runs are resampled first, then their steps.
  std::vector<std::filesystem::path> more_base, more_compare;
  DiffGate gate = DiffGate::kSignificant;
  double confidence = 0.95;  ///< two-sided, of every interval
  /// Fewer measured steps on a side make the significant and interval gates inconclusive.
  size_t min_steps = 5;
  int resamples = 2000;  ///< bootstrap resamples (seeded: the same input gives the same report)
};

struct DiffSide {
  std::filesystem::path folder;  ///< of the first run
  double step_ms = 0;            ///< mean over all measured steps of all runs
  size_t steps = 0;              ///< measured steps, all runs
  size_t warmup_steps = 0;       ///< ProfilerStep#0 of traces with later steps: left out of step_ms
  double warmup_ms = 0;
  size_t runs = 1;
  double step_median_ms = 0;  ///< median over all measured steps of all runs
  double work_ms = 0;         ///< step work time (WorkTime): 0 when no step is marked
};

struct DiffReport {
  DiffSide base, compare;
  std::vector<DeltaRow> operators, kernels;  ///< sorted by |delta| descending
  /// (compare - base) / base in percent of the mean step time; nullopt when the base time is 0.
  std::optional<double> step_change_percent;
  /// The change of the median step time with its interval; nullopt with < 2 steps on a side.
  std::optional<ChangeInterval> step_change;
  double confidence = 0.95;
  int resamples = 0;
  /// The change of the step work time with its interval (what the significant and interval
  /// gates judge); nullopt with < 2 steps on a side or no marked step.
  std::optional<ChangeInterval> work_change;
  size_t min_steps = 5;
  /// What the significant and interval gates judge: the step work time of host-bound profiles, the
  /// median step time of profiles with device tasks (where the host waits on the device at places
  /// that move from step to step, so a per-position minimum undercounts the step).
  bool judges_work = true;
  DiffGate gate = DiffGate::kSignificant;
  double fail_above_percent = 0;  ///< the limit, when asked (verdict != kNotAsked)
  Verdict verdict = Verdict::kNotAsked;
  std::string verdict_reason;  ///< one sentence: why the verdict (empty when not asked)
  bool regressed = false;      ///< verdict == kRegressed
};
Expected<DiffReport> RunDiff(const DiffOptions& options, Context& ctx);

// ---- collect ---------------------------------------------------------------------------------

struct CollectOptions {
  std::filesystem::path output;  ///< the PROF_<timestamp>_<pid> folder is made in here
  int steps = 0;                 ///< 0: the whole run
  bool record_shapes = false, with_stack = false;
  /// The program: a Python interpreter, its options, then the script or -m module and its
  /// arguments. `application`, when set, is split like a shell line and used instead.
  std::vector<std::string> command;
  std::string application;
};

struct CollectReport {
  std::filesystem::path prof_dir;  ///< where the trace went
  std::vector<std::string> argv;   ///< what was run
  ProcessResult program;           ///< how the program ended
  size_t traces = 0;               ///< trace files found in prof_dir afterwards
};

/// The launcher command for `options` (no side effects): kInvalidArgument when there is no
/// program, it does not start with a Python interpreter, or has no script.
Expected<std::vector<std::string>> CollectArgv(const CollectOptions& options);

/// Runs the program under the profiler (inherited stdin/stdout/stderr). The program failing is
/// not an error: it is in CollectReport::program.
Expected<CollectReport> RunCollect(const CollectOptions& options, Context& ctx);

// ---- query -----------------------------------------------------------------------------------
// Read-only access to an imported profile for library callers (tune), `prof query` and the
// Python companion (portkit.prof.load): typed rows, never the store's tables or SQL.

struct QueryOptions {
  std::filesystem::path dir;                               ///< an imported profile folder (holding portkit.db)
  int64_t max_string_bytes = kDefaultMaxStoredValueBytes;  ///< as ExportOptions
  /// The data folders and the target (a name or a folder, empty: the default target) whose facts
  /// say which device kernels are communication: read by Ops, Steps and Comm, not by events.
  /// Without data folders Ops and Steps fail (no target) and Comm knows the generic names only.
  DataDirs data_dir;
  std::string target;
};

/// One timed event of the store (a host operator, a kernel, a runtime call, a step, ...). The
/// views stay valid during the callback only.
struct EventRow {
  std::string_view trace;  ///< the trace's path, relative to the profile folder
  std::string_view kind;   ///< EventKindName: cpu_op, kernel, gpu_memcpy, gpu_memset, runtime, step, ...
  std::string_view name;
  std::string_view category;  ///< the trace's own `cat` (empty when none)
  int64_t pid = 0, tid = 0;   ///< host process and thread; for device tasks: device and stream
  int64_t ts_ns = 0, dur_ns = 0;
  int64_t correlation = -1, external_id = -1;  ///< -1: not recorded
  bool has_input_dims = false;                 ///< the trace recorded input shapes for it
  std::string_view input_dims, input_types;    ///< raw JSON text as recorded (empty: not recorded)
  std::string_view args;                       ///< the `args` object's JSON text (EventFilter::with_args)
};

/// Which events ForEachEvent visits; every condition given must hold.
struct EventFilter {
  std::vector<std::string> kinds;  ///< EventKindName values; empty: every kind
  std::vector<std::string> names;  ///< exact names; empty: every name
  std::string name_regex;          ///< ECMAScript, found anywhere in the name; empty: every name
  uint64_t limit = 0;              ///< stop after this many rows; 0: no limit
  bool with_args = false;          ///< read each event's args (EventRow::args)
};

/// Host operators (cpu_op) per name and input shapes, as host_op_summary of `prof export summary`.
struct OpRow {
  std::string name;
  std::string input_dims;  ///< empty when not recorded (or when not split by shape)
  int64_t count = 0, self_ns = 0, total_ns = 0;
};

/// A step (ProfilerStep#N) of one trace: its span over every event of that name.
struct StepRow {
  std::string trace, name;
  int64_t number = -1;  ///< N of ProfilerStep#N (-1 when the name has no number)
  int64_t start_ns = 0, end_ns = 0;
  /// ProfilerStep#0 of a trace that marks later steps: the warm-up, left out of step times.
  bool warmup = false;
};

/// A communication kernel (nccl, rccl, AllReduce, or a name of the target's
/// profile.communication_kernels) with the collective arguments its trace recorded.
struct CommRow {
  std::string trace, name;
  int64_t device = 0, stream = 0, ts_ns = 0, dur_ns = 0;
  std::string collective, group, dtype;                      ///< args "Collective name", "Process Group Name", "dtype"
  int64_t in_nelems = -1, out_nelems = -1, group_size = -1;  ///< -1: not recorded
};

/// An imported profile opened for reading (OpenProfile).
class ProfileQuery {
 public:
  ProfileQuery(ProfileQuery&&) noexcept;
  ProfileQuery& operator=(ProfileQuery&&) = delete;
  ~ProfileQuery();

  const std::filesystem::path& folder() const { return folder_; }
  const std::filesystem::path& database() const { return database_; }
  /// Rows of the store out of range (an edited store), hidden from every accessor.
  const StoreReadNotes& left_out() const;
  /// What a reader should say: imports that did not finish, rows left out. One line each.
  const std::vector<std::string>& warnings() const { return warnings_; }

  /// Calls `visit` for each event that passes `filter`, one row at a time (the profile is never
  /// held in memory), in the store's order: traces in import order, then pid, tid, start, longer
  /// first (an event before the events it encloses). A non-ok status from `visit` stops the walk
  /// and is returned. kInvalidArgument for a name_regex that is not a regular expression.
  Status ForEachEvent(const EventFilter& filter, const std::function<Status(const EventRow&)>& visit);
  // The tables below are small (a row per operator, step or collective) and returned whole; of
  // `filter` they use the names, name_regex and limit.

  /// Host operators by name (and input shapes with `by_shape`): largest self time first, ties by
  /// name and shapes.
  Expected<std::vector<OpRow>> Ops(const EventFilter& filter = {}, bool by_shape = true);
  /// The steps of every trace, by trace path and start.
  Expected<std::vector<StepRow>> Steps(const EventFilter& filter = {});
  /// The communication kernels, in ForEachEvent's order; empty when the profile has none.
  Expected<std::vector<CommRow>> Comm(const EventFilter& filter = {});

 private:
  friend Expected<ProfileQuery> OpenProfile(const QueryOptions& options);
  ProfileQuery() = default;
  /// Loads the profile (events, steps, target facts) for Ops and Steps, once.
  Expected<const Profile*> LoadProfile();
  /// The path of the store's trace `id` ("" when there is none).
  const std::string& TracePath(int64_t id) const;
  QueryOptions options_;
  std::filesystem::path folder_, database_;
  std::vector<std::string> warnings_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Profile> profile_;
  std::vector<std::pair<int64_t, std::string>> trace_paths_;  // (id, path), by id
};

/// Opens the imported profile folder `options.dir` read-only. Errors name the folder: kNotFound
/// when it does not exist or holds no portkit.db (not imported, or not a profile), kUnsupported
/// when the store is of another schema version (with what to do), kParse when portkit.db is not a
/// SQLite file.
Expected<ProfileQuery> OpenProfile(const QueryOptions& options);

}  // namespace portkit::prof
