#pragma once
/// The analyse engine as a library: `RunAnalyse` (migration analysis of a PyTorch project) and
/// `RunMigrate` (a migrated copy of a project for the target). Both take an options struct and a
/// Context and return a report; they never parse argv, print to stdout or pick exit codes. The
/// report files (CSV, JSON, SARIF, change lists, the `files | statistics` table) are rendered from
/// these reports by src/render/analyse_report.h and src/render/migrate_report.h.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analyse/custom_ops.h"
#include "analyse/finding.h"
#include "analyse/source_files.h"
#include "analyse/third_party.h"
#include "core/context.h"
#include "core/status.h"

namespace portkit::analyse {

// ---------------------------------------------------------------------------------------------
// analyse

enum class AnalyseMode : uint8_t { kTorchApis, kThirdParty, kAffinityApis, kDynamicShape };

/// The CSV files a mode writes; the CSV renderer writes one layout per value.
enum class CsvLayout : uint8_t {
  kApiFindings,    ///< unsupported_api.csv, unknown_api.csv, api_precision_advice.csv,
                   ///< api_performance_advice.csv, cuda_op_list.csv
  kLibraryImpact,  ///< full_unsupported_results.csv, framework_unsupported_op.csv, unknown_op.csv,
                   ///< migration_needed_op.csv, cuda_op.csv, cuda_op_list.csv
  kAffinityCalls,  ///< affinity_api_call.csv
  kNone,           ///< no CSV (dynamic_shape: the instrumented copy is the result)
};

struct ModeRun;  // engine-internal state of one run (src/analyse/analyse_modes.h)

/// One analysis mode: everything that differs between modes is a field here, so adding a mode
/// is one row of the table (AnalyseModes()) and the functions it names.
struct AnalyseModeInfo {
  AnalyseMode mode;
  std::string_view name;             ///< the `-m` value and report.json's "mode"
  std::string_view help;             ///< one line for --help
  CsvLayout csv;                     ///< what `--format csv` writes
  std::string_view default_formats;  ///< formats written when --format is not given
  /// Loads what the mode needs beyond the target (before any file is created); may be null.
  Status (*prepare)(ModeRun&);
  /// The mode's work over the loaded project: fills the report's findings and mode data.
  Status (*run)(ModeRun&);
};

/// The table of modes, in the order --help lists them.
std::span<const AnalyseModeInfo> AnalyseModes();
const AnalyseModeInfo& ModeInfo(AnalyseMode mode);
/// The mode named `name` ("torch_apis", ...), or nullopt.
std::optional<AnalyseMode> AnalyseModeByName(std::string_view name);

struct AnalyseOptions {
  std::filesystem::path input;   ///< folder of the project to analyse
  std::filesystem::path output;  ///< results go to <output>/<basename(input)>_analysis/
  std::string version;           ///< torch version of the analysed code; empty = newest list
  AnalyseMode mode = AnalyseMode::kTorchApis;
  std::string target;                  ///< a name under data/targets or a folder with a target.json; empty = default
  std::vector<std::string> env_paths;  ///< extra import roots used to resolve names
  std::vector<std::string> api_files;  ///< full_unsupported_results.csv of earlier third_party runs
  /// Files left out of the analysis: shell globs on paths relative to `input` (a glob matching a
  /// folder leaves out everything below it; one without '/' also matches file names).
  std::vector<std::string> exclude;
  /// Rule names: report only these rules' findings (empty: all) ...
  std::vector<std::string> select;
  /// ... and drop these rules' findings. Inline `# portkit: ignore[RULE]` comments are always
  /// applied first.
  std::vector<std::string> ignore;
  size_t max_file_bytes = kDefaultMaxPythonFileBytes;  ///< larger Python files are skipped
  // Worker threads come from Context::jobs.
  /// Write into an existing <output>/<basename>_analysis/ that an earlier `portkit analyse` did
  /// not create (refused otherwise: kInvalidArgument).
  bool force = false;
};

/// A data loop that dynamic_shape wrapped in the instrumented copy.
struct WrappedLoopRecord {
  std::string file;  ///< display path
  uint32_t line = 0;
  std::string iterable;
};

/// What `-m dynamic_shape` wrote: the instrumented copy of the project in the results folder.
struct InstrumentedCopy {
  size_t files_copied = 0;         ///< every file of the project, instrumented or not
  size_t python_instrumented = 0;  ///< Python files with at least one wrapped loop
  std::vector<WrappedLoopRecord> loops;
  std::vector<std::string> files;  ///< written files, relative to the results folder, sorted
  std::string entry;               ///< the script to run the copy with (relative), or empty
};

struct AnalyseReport {
  AnalyseMode mode = AnalyseMode::kTorchApis;
  std::string target;                 ///< target name
  std::string list_version;           ///< torch version of the support list used ("2.1"), may be empty
  std::string project;                ///< basename(input): the first component of every display path
  std::filesystem::path input;        ///< the analysed folder (absolute): display paths are below it
  std::filesystem::path results_dir;  ///< <output>/<project>_analysis, created by the run
  std::vector<Finding> findings;      ///< sorted, no duplicates
  FileStats files;
  std::vector<FileProblem> problems;       ///< skipped files, syntax errors, symlink loops, ...
  std::vector<CustomOp> custom_ops;        ///< registered from C++/CUDA sources
  std::vector<AffectedFunction> affected;  ///< third_party: library functions reaching an offence
  InstrumentedCopy copy;                   ///< dynamic_shape

  /// Findings of `category`.
  size_t Count(Category category) const;
};

/// Runs the analysis. Errors (the input is not a folder, an unknown target or version, an
/// unreadable -api file or data file, a results folder that cannot be created) come before any
/// file is written; file problems inside the project are data in the report, never errors.
/// Report files are written by the renderers; only dynamic_shape writes (its copy) here.
Expected<AnalyseReport> RunAnalyse(const AnalyseOptions& options, Context& ctx);

// ---------------------------------------------------------------------------------------------
// migrate

struct MigrateOptions {
  std::filesystem::path input;   ///< folder of the project to migrate
  std::filesystem::path output;  ///< the copy goes to <output>/<basename(input)>_msft/
  std::string target;            ///< a name under data/targets or a folder with a target.json; empty = default
  bool unsafe = false;           ///< also apply affinity replacements that may change numerics
  /// torch version of the code ("2.1.0"; empty = newest list): APIs its support list marks
  /// unsupported are left unchanged with a warning.
  std::string version;
  /// Only add the target's transfer_import line (run-time mapping of CUDA calls) to the entry
  /// scripts: `entries`, or every file with a top-level `if __name__ == "__main__":`.
  bool transfer_only = false;
  std::vector<std::string> entries;                    ///< paths relative to the input folder (with transfer_only)
  std::string python = "python3";                      ///< the CPython that checks every migrated file
  size_t max_file_bytes = kDefaultMaxPythonFileBytes;  ///< larger Python files are copied unchanged
  /// Write into an existing <output>/<basename>_msft/ that an earlier `portkit migrate` did not
  /// create (refused otherwise: kInvalidArgument).
  bool force = false;
  /// Compute the changes only: no folder is created and nothing is written.
  bool dry_run = false;
  /// Where the target's import_line goes: kEntry (default) adds it to the entry scripts and to
  /// files that name the target's module, and leaves it out of a module that an entry script
  /// importing the target's module imports at its top level (directly or through other modules);
  /// kEveryFile adds it to every changed file that does not import the module.
  enum class ImportPolicy : uint8_t { kEntry, kEveryFile } import_policy = ImportPolicy::kEntry;
};

/// One edit of the migration, as change_list.csv lists it. Operation "Review" is an edit the
/// migration is not sure of: listed, not made.
struct MigrateChange {
  std::string file;  ///< display path
  uint32_t start_line = 0, end_line = 0;
  std::string operation;  ///< FuncNameModify, AttributeModify, ReplaceString, InsertImport, Review, ...
  std::string message;
  std::string edit_class;  ///< see Edit::edit_class; "review" for Review rows
};

struct MigrateReport {
  std::string target;
  std::string project;                ///< basename(input)
  std::filesystem::path results_dir;  ///< <output>/<project>_msft, holds the copy (and nothing else)
  /// <output>/<project>_msft_report, beside the copy: migration.patch, and the change lists and
  /// log that render/migrate_report.h writes.
  std::filesystem::path reports_dir;
  bool unsafe = false;
  bool transfer_only = false;
  std::string list_version;            ///< torch version of the support list used, may be empty
  std::vector<MigrateChange> changes;  ///< by file, then position
  size_t files_changed = 0;
  size_t files_copied = 0;  ///< every file of the copy (changed ones included)
  /// Files copied unchanged and why: the loader's problems (skipped files, syntax errors), kind
  /// "not_migrated" for a rewrite that would not parse or compile (the file is left unchanged);
  /// also "unsupported_api" (an API the target does not support, left unchanged at that line) and
  /// "not_compiled" (python3 cannot compile the original either).
  std::vector<FileProblem> warnings;
  /// Files of the copy written by the run, relative to results_dir, sorted.
  std::vector<std::string> files_written;
};

/// The name of the folder beside the copy that holds migrate's reports.
inline std::string MigrateReportsFolderName(const std::string& project) { return project + "_msft_report"; }

/// Writes the migrated copy into <output>/<basename>_msft/ and migration.patch beside it into
/// <output>/<basename>_msft_report/ (both folders follow the same overwrite rule) and returns the
/// changes. Every edited file must parse (tree-sitter) and compile (python3, all files in one
/// process; skipped with a log warning when python3 cannot run); one that does not is copied
/// unchanged and reported. Errors before any file is written: input not a folder, unknown target
/// or one that names no renames, unknown version, bad migrate_rules.json, --entry outside the
/// input, a results folder that cannot be created; an error while writing the copy ends the run
/// with kIo.
Expected<MigrateReport> RunMigrate(const MigrateOptions& options, Context& ctx);

}  // namespace portkit::analyse
