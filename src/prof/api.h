#pragma once
/// The profiling engine as a library: collect a profile, import traces into a store, export
/// summaries and timelines, run the advisor, diff two profiles. Each entry point takes an options
/// struct and the run's Context and returns data (or an error); none reads argv, writes to stdout
/// or picks an exit code: the command line (src/cli/prof.cc) and the renderers
/// (src/render/prof_*.h) do that. Progress goes to ctx.logger.
#include <cstdint>
#include <filesystem>
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
  std::string json;  ///< the Chrome-trace JSON text
  TimelineStats stats;
};
Expected<TimelineReport> RunExportTimeline(const ExportOptions& options, Context& ctx);

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
  kInterval,  ///< trips when the lower bound of the step change's interval is above the limit
  kPoint,     ///< trips when the mean step change is above it (the rule before the interval)
};

struct DiffOptions {
  std::filesystem::path base, compare;  ///< profile folders; imported first when not yet
  /// The regression gate: the step time may grow by at most this percentage.
  std::optional<double> fail_above_percent;
  int64_t max_string_bytes = kDefaultMaxStoredValueBytes;  ///< as ExportOptions
  /// More runs of each side (profile folders, imported first when not yet), pooled with `base`
  /// and `compare`: runs are resampled first, then their steps.
  std::vector<std::filesystem::path> more_base, more_compare;
  DiffGate gate = DiffGate::kInterval;
  double confidence = 0.95;  ///< two-sided, of every interval
  int resamples = 2000;      ///< bootstrap resamples (seeded: the same input gives the same report)
};

struct DiffSide {
  std::filesystem::path folder;  ///< of the first run
  double step_ms = 0;            ///< mean over all measured steps of all runs
  size_t steps = 0;              ///< measured steps, all runs
  size_t warmup_steps = 0;       ///< ProfilerStep#0 of traces with later steps: left out of step_ms
  double warmup_ms = 0;
  size_t runs = 1;
  double step_median_ms = 0;  ///< median over all measured steps of all runs
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
  /// The rule the gate used: kPoint when asked, or when there is no interval (said in `gate_note`).
  DiffGate gate = DiffGate::kInterval;
  std::string gate_note;
  bool regressed = false;  ///< the gate was asked for and tripped
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

}  // namespace portkit::prof
