#pragma once
/// The tuning engine as a library: `RunTune` tunes a model's operators (AOE's OPAT) against a
/// knowledge base and returns what happened to each; the `RunBank*` functions read and merge a
/// knowledge base; `RunSgat` (subgraph tuning of a PyTorch model) and `RunGdat` (DDP gradient
/// tuning) run the Python companion, where those engines live because they must run inside a
/// PyTorch process. No argv, stdout or exit codes here: the command line (src/cli/tune*.cc) turns
/// flags and environment into these options, and src/render/tune_*.cc renders the reports.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/status.h"
#include "core/subprocess.h"
#include "tune/knowledge_base.h"
#include "tune/report.h"
#include "tune/session.h"

namespace portkit::tune {

struct TuneOptions {
  int job_type = 2;  ///< 2 = operator tuning (OPAT), the only one implemented
  /// The operators: an op list (JSON, see docs/tune.md) or a profile folder holding the
  /// `portkit.db` of `portkit prof import`. Exactly one of `model` and `replay` is set.
  std::filesystem::path model;
  /// A recorded landscape: candidates are answered from it, nothing is compiled or measured.
  std::filesystem::path replay;
  std::string strategy = kDefaultStrategy;
  std::vector<std::string> strategy_options;  ///< NAME=VALUE
  int max_evals = kDefaultMaxEvals;           ///< candidates per operator, >= 1
  double max_seconds = 0;                     ///< per operator, 0 = no limit, >= 0
  int patience = kDefaultPatience;            ///< evaluations without a new best before stopping, 0 = never
  uint64_t seed = 0;                          ///< of the strategies' random choices
  bool repeat_tune = false;                   ///< re-tune operators the bank holds; replace only if faster
  std::vector<std::string> fixes;             ///< --fix NAME=V1[,V2...]
  int repeats = 7;                            ///< timed repeats per candidate, 5 to 1000
  int parallel_compile = 1;                   ///< compiler processes at once, >= 1
  std::string compiler = "c++";
  /// The knowledge base: a folder (its tune_bank.db; kernels are cached in its kernels/) or a
  /// database file. Created when missing.
  std::filesystem::path bank;
  /// Where to write the landscape of a measuring run (empty: not written). Lines are appended as
  /// candidates are measured, then the file is rewritten sorted.
  std::filesystem::path record;
  int hardware_threads = 0;  ///< bounds the THREADS knob; <= 0: this machine's cores
  /// Only look the operators up: the bank is opened read-only (a read-only file or folder works),
  /// nothing is compiled, measured or stored; operators without a usable entry are untuned.
  bool lookup_only = false;
  /// Called with the result so far before the first operator and after each one (the CLI writes
  /// the result file as tuning proceeds); an error fails the run.
  std::function<Status(const SessionResult&)> on_progress;
};

struct TuneTimings {
  double load_seconds = 0;  ///< reading the operators and opening the bank
  double tune_seconds = 0;  ///< the session (building, measuring, bank writes)
  double total_seconds = 0;
};

struct TuneReport {
  SessionResult session;  ///< per-operator results, untuned operators, bank path, key
  RepoAccounting accounting;
  ModelTotals totals;  ///< model time before and after, from counts x per-call times
  std::string input;   ///< the op list, profile folder or landscape read
  /// Rows of the input left out before any operator was made of them, and why (OpList::left_out).
  std::vector<std::string> input_left_out;
  bool replay = false;
  std::filesystem::path landscape;  ///< written by a measuring run ("" when none)
  /// Files this run wrote, in order (the landscape; the CLI adds what it renders).
  std::vector<std::filesystem::path> files_written;
  TuneTimings timings;
};

/// Checks every option without reading or creating anything: job type, strategy name and its
/// options, budgets, repeats, parallel compiles, --fix syntax and knobs, and that exactly one
/// input is given. kInvalidArgument naming the option.
Status ValidateTuneOptions(const TuneOptions& options);

/// Runs a tuning session: validates the options, reads the operators, opens (creating) the bank,
/// tunes, and returns the report. Progress and per-operator lines go to ctx.logger. Errors: the
/// options (kInvalidArgument), the input (kNotFound, kParse), the bank (kIo, kParse,
/// kUnsupported: another schema, with what to do; kInvalidArgument: a read-only bank for a run
/// that tunes), and kInternal ("run failed: ...") for infrastructure failures: a broken compiler
/// (the default strategy does not build or run), a disk or file-size limit hit while writing the
/// bank, the landscape or a progress report.
Expected<TuneReport> RunTune(const TuneOptions& options, Context& ctx);

/// A bank's entries, as read.
struct BankListing {
  std::filesystem::path path;  ///< the database file
  int schema_version = 0;      ///< 0: written before schema versions (read as it is)
  std::vector<BankEntry> entries;
  /// Entries left out (a string over the limit, a time out of range): one line each, naming the
  /// bank, the entry and why (KnowledgeBase::List).
  std::vector<std::string> left_out;
};

/// Every entry of the bank at `bank` (folder or file), opened read-only. kNotFound when there is
/// no bank there. Strings longer than `max_string_bytes` are never loaded (their entry is left
/// out).
Expected<BankListing> RunBankList(const std::filesystem::path& bank,
                                  int64_t max_string_bytes = kDefaultMaxBankStringBytes);
/// The entries of one operator, given as signature, op name or op type. kNotFound when none.
Expected<BankListing> RunBankShow(const std::filesystem::path& bank, const std::string& op,
                                  int64_t max_string_bytes = kDefaultMaxBankStringBytes);
/// The entries to export (the CLI writes them with EntriesToJson); read-only like RunBankList.
Expected<BankListing> RunBankExport(const std::filesystem::path& bank,
                                    int64_t max_string_bytes = kDefaultMaxBankStringBytes);

struct BankImportReport {
  std::filesystem::path path;  ///< the database file written
  int added = 0, updated = 0, kept = 0;
  /// Entries refused (configuration outside the operator's space, implausible times), with why.
  std::vector<std::string> rejected;
};
/// Merges the entries of a JSON file (EntriesToJson's form) into the bank at `bank` (created when
/// missing). Each entry is validated (CheckEntry) and refused when unusable; imported entries
/// are marked not measured here: one replaces an imported entry only if faster, never a
/// measured one.
Expected<BankImportReport> RunBankImport(const std::filesystem::path& bank, const std::filesystem::path& file);

/// How a run of the Python companion ended.
enum class CompanionEnd {
  kOk,       ///< exit status 0
  kRefused,  ///< exit status 2: it refused the model, input or description, and said why on stderr
  kFailed,   ///< any other end (another status, a signal, a timeout): CompanionRun::failure says which
};

/// One run of the Python companion (`python -m portkit.<module>`), whose stdout and stderr are
/// this process's: its progress and its own messages reach the user as it runs.
struct CompanionRun {
  std::string python;             ///< the interpreter: the option, else $PORTKIT_PYTHON, else python3
  std::vector<std::string> argv;  ///< the whole command line run
  ProcessResult process;          ///< how it ended (no output captured)
  CompanionEnd end = CompanionEnd::kFailed;
  std::string failure;  ///< kFailed: one line naming the companion and how it ended
};

/// SGAT, subgraph tuning of a PyTorch model (AOE's job type 1; docs/tune.md "PyTorch models"),
/// run by `python -m portkit.tune`: the model is captured with torch.fx and split into blocks,
/// each block's strategies are timed interleaved, the winners kept in the knowledge base and the
/// optimized model written to `output`.
struct SgatOptions {
  /// 1 = SGAT; 2 = OPAT kernels for the model's Linear layers first (portkit tune --job-type=2
  /// into the same bank, run by the companion), then SGAT with them as a candidate.
  int job_type = 1;
  std::string model;                ///< Python factory pkg.module:make_model returning an nn.Module
  std::vector<std::string> inputs;  ///< [DTYPE:]D0xD1x...[:LOW..HIGH] parts or comma lists of them
  std::filesystem::path output;     ///< folder for optimized.pt, optimized.json and the result file
  std::filesystem::path bank;       ///< knowledge-base folder; empty: the companion's default
  std::string python;               ///< interpreter with torch; empty: $PORTKIT_PYTHON, else python3
  int rounds = 15;                  ///< interleaved timing rounds per comparison, 3 to 10000
  int threads = 0;                  ///< pin the intra-op thread count; 0: tuned
  int max_evals = 0;                ///< job type 2: candidates per kernel; 0: portkit tune's default
  double time_budget = -1;          ///< seconds the tuning may take; < 0: the companion's default; 0: none
  bool lookup_only = false;         ///< use the bank's entries, tune nothing
  bool repeat_tune = false;         ///< re-tune bank hits; replace only when beaten beyond noise
  bool no_compile = false;          ///< do not try torch.compile
  /// "fp32" (default: no lower-precision candidate), "bf16" or "int8-dynamic": whole-model
  /// candidates in that precision too, each accepted only within the accuracy limits below.
  std::string precision = "fp32";
  double max_rel_err = -1;  ///< accuracy limit on max|out - fp32| / max|fp32|; < 0: the mode's default
  double min_cosine = -2;   ///< accuracy limit on the outputs' cosine similarity to fp32; < -1: the default
  /// Job type 2: how this program was started (argv[0]), the `portkit` the companion runs when
  /// this process's executable (/proc/self/exe) cannot be read.
  std::string program_name = "portkit";
};

/// The fixed names of the artifact an SGAT run writes into its output folder (docs/safety.md,
/// Outputs); the result file's name is new each run.
const std::vector<std::string>& SgatArtifactNames();

struct SgatReport {
  CompanionRun companion;
  /// The names of SgatArtifactNames() present in the output folder after a run that ended kOk.
  std::vector<std::string> artifact_files;
};

/// Checks the options without reading or creating anything: the job type (kUnsupported), the
/// model factory, the --input syntax (every part's dtype, dimensions and value range) and the
/// numeric options (kInvalidArgument naming the option).
Status ValidateSgatOptions(const SgatOptions& options);

/// Validates the options, then runs `python -m portkit.tune` with the companion first on
/// PYTHONPATH and logs the command. The companion's own end is in the report; an error only when
/// the options are bad or the interpreter cannot be started (kInvalidArgument, with what to do).
Expected<SgatReport> RunSgat(const SgatOptions& options, Context& ctx);

/// GDAT, gradient (DDP communication) tuning (AOE's job type 4; docs/tune.md "GDAT"), run by
/// `python -m portkit.gdat`: online over the first steps of real DDP training (`model`), on a
/// cost-model description (`simulate`), or measuring such a description of `model` (`describe`).
/// Exactly one of `model` (without `describe`) and `simulate` is given.
struct GdatOptions {
  std::string framework = "pytorch";   ///< the only one implemented (DDP)
  std::string model;                   ///< pkg.module:callable returning the nn.Module to train
  std::vector<std::string> inputs;     ///< input shapes (8x3x32x32, int64:8x128), with `model`
  std::filesystem::path simulate;      ///< cost-model description (JSON) to tune on
  std::filesystem::path describe;      ///< measure a description of `model` into this file instead
  std::filesystem::path output = ".";  ///< folder for aoe_result_gdat_*.json and gdat_settings.json
  std::string python;                  ///< interpreter with torch; empty: $PORTKIT_PYTHON, else python3
  std::string backend = "gloo";        ///< process-group backend: gloo, CUDA's, or the target's
  std::string target;                  ///< the target whose backends are offered; empty: the default
  double alpha_ms = -1;                ///< describe: all-reduce latency to simulate (< 0: not given)
  double beta_ms_per_mb = -1;          ///< describe: all-reduce cost per MiB (given with alpha_ms)
  bool measure_comm = false;           ///< describe: measure alpha and beta with `nproc` local ranks
  int nproc = 2;                       ///< ranks started on this machine, 1 to 256
  int warmup = 2;                      ///< untimed steps after each DDP rebuild, >= 1
  int measure = 5;                     ///< timed steps per point (median), >= 1
  int max_trials = 0;                  ///< points measured at most; 0: until the search converges
  int seed = 0;                        ///< of the model and of the random batches
  double lr = 0.01;                    ///< SGD learning rate of the training steps
  double timeout = 600;                ///< seconds before a stuck rank is ended, > 0
  bool allow_lossy = false;            ///< also try the fp16 and PowerSGD hooks
  bool exhaustive = false;             ///< simulate: evaluate every point too
  /// Comma lists of the values searched; empty: the companion's defaults (docs/tune.md).
  std::string bucket_caps, first_buckets, bucket_views, static_graphs, powersgd_ranks;
};

/// The one fixed-name file a GDAT run writes: the `describe` file, else OUTPUT/gdat_settings.json
/// (the result file's name is new each run).
std::filesystem::path GdatWrittenFile(const GdatOptions& options);

struct GdatReport {
  CompanionRun companion;
  std::filesystem::path written;  ///< GdatWrittenFile(options): written when companion.end is kOk
};

/// Checks the options without creating anything: the framework, which options go together, the
/// model factory, and that `backend` is a process-group backend of `target` (read from `data`:
/// the target's distributed_backends and CUDA's). kInvalidArgument naming the option, or the
/// target's loading error.
Status ValidateGdatOptions(const GdatOptions& options, const DataDirs& data);

/// Validates the options (with ctx.data_dir), then runs `python -m portkit.gdat describe |
/// simulate | train` with the companion first on PYTHONPATH. The companion's own end is in the
/// report; an error when the options are bad, or kInternal when the interpreter cannot be started.
Expected<GdatReport> RunGdat(const GdatOptions& options, Context& ctx);

}  // namespace portkit::tune
