#pragma once
/// The tuning engine as a library: `RunTune` tunes a model's operators (AOE's OPAT) against a
/// knowledge base and returns what happened to each; the `RunBank*` functions read and merge a
/// knowledge base. No argv, stdout or exit codes here: the command line (src/cli/tune.cc) turns
/// flags and environment into these options, and src/render/tune_*.cc renders the reports.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/status.h"
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

}  // namespace portkit::tune
