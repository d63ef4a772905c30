#include "cli/tune.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "cli/cli_common.h"
#include "cli/tune_gdat.h"
#include "cli/tune_pytorch.h"
#include "core/atomic_file.h"
#include "core/output_policy.h"
#include "render/tune_render.h"
#include "tune/api.h"
#include "tune/strategies/strategy.h"

namespace portkit::cli {
namespace fs = std::filesystem;
namespace {

bool EnvTrue(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return false;
  std::string s(v);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s == "true" || s == "1" || s == "yes";
}

void Print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

/// The folder a bank location writes into: the location itself, or a database file's folder.
fs::path BankFolder(const fs::path& location) {
  std::error_code ec;
  if (fs::is_regular_file(location, ec)) return location.parent_path().empty() ? fs::path(".") : location.parent_path();
  return location;
}

enum class BankAction { kList, kShow, kExport, kImport };

struct BankArgs {
  BankAction action = BankAction::kList;
  std::string argument;  // the operator of show, the file of export / import
  std::vector<std::string> formats;
  bool force = false;  // export: replace a file `bank export` did not write
  uint64_t max_string_mb = tune::kDefaultMaxBankStringBytes >> 20;
};

/// The first bytes of every file `tune bank export` writes (EntriesToJson).
constexpr std::string_view kBankExportHead = "{\n  \"portkit_tune_bank\": ";

/// Says which entries a listing left out (a string over the limit, a time out of range).
void WarnLeftOut(const tune::BankListing& listing, Context& ctx) {
  for (const auto& line : listing.left_out) ctx.logger.Warning(line);
  if (!listing.left_out.empty())
    ctx.logger.Warning(std::to_string(listing.left_out.size()) + " of " +
                       std::to_string(listing.left_out.size() + listing.entries.size()) + " entries of " +
                       listing.path.string() + " left out (not shown, not exported)");
}

int BankCommand(const BankArgs& a, const std::string& bank_flag, Context& ctx) {
  fs::path bank = tune::BankDir(bank_flag);
  const auto max_string_bytes = static_cast<int64_t>(a.max_string_mb << 20);
  switch (a.action) {
    case BankAction::kList: {
      auto listing = tune::RunBankList(bank, max_string_bytes);
      if (!listing.ok()) return Fail(ctx, listing.status());
      WarnLeftOut(*listing, ctx);
      Print(Wants(a.formats, "json") ? tune::EntriesToJson(listing->entries) : render::BankListText(*listing));
      return kExitOk;
    }
    case BankAction::kShow: {
      auto listing = tune::RunBankShow(bank, a.argument, max_string_bytes);
      if (!listing.ok()) return Fail(ctx, listing.status());
      WarnLeftOut(*listing, ctx);
      Print(Wants(a.formats, "json") ? tune::EntriesToJson(listing->entries) : render::BankShowText(*listing));
      return kExitOk;
    }
    case BankAction::kExport: {
      if (Status st = CheckOutputFile(a.argument, "export"); !st.ok()) return Fail(ctx, st);
      // Only a file portkit wrote is replaced without --force (the folder's ledger,
      // core/output_policy.h; an export written before the ledger is known by its first bytes).
      if (Status st = CheckReplaceable(a.argument, "export", a.force);
          !st.ok() && !StartsWithAny(a.argument, {kBankExportHead}))
        return Fail(ctx, st);
      auto listing = tune::RunBankExport(bank, max_string_bytes);
      if (!listing.ok()) return Fail(ctx, listing.status());
      WarnLeftOut(*listing, ctx);
      if (Status st = WriteFileAtomic(a.argument, tune::EntriesToJson(listing->entries)); !st.ok())
        return Fail(ctx, st);
      if (Status st = RecordWrittenFile(a.argument); !st.ok()) return Fail(ctx, st);
      ctx.logger.Info("Exported " + std::to_string(listing->entries.size()) + " entries to " + a.argument + ".");
      return kExitOk;
    }
    case BankAction::kImport: {
      if (Status st = CheckInput(a.argument, "import", PathKind::kFile); !st.ok()) return Fail(ctx, st);
      if (Status st = CheckOutputFolder(BankFolder(bank), "--tune-bank"); !st.ok()) return Fail(ctx, st);
      auto imported = tune::RunBankImport(bank, a.argument);
      if (!imported.ok()) return Fail(ctx, imported.status());
      ctx.logger.Info(render::BankImportText(*imported, a.argument));
      return kExitOk;
    }
  }
  return kExitFailure;
}

/// The values of `portkit tune`'s options (the bank sub-command's are in BankCli).
struct TuneArgs {
  tune::TuneOptions opt;
  std::string model, replay, output = ".", bank_flag, record;
  int parallel = 0;  // 0: not given
  bool list_strategies = false;
  bool force = false;  // replace tuned_plan.json / tune_report.json that portkit did not write
  std::vector<std::string> formats;
};

void AddTuneOptions(CLI::App& app, TuneArgs& a) {
  tune::TuneOptions& opt = a.opt;
  app.add_option("--job-type", opt.job_type,
                 "2 = operator tuning (OPAT) of an op list or profile; with --framework=pytorch: 1 = subgraph tuning "
                 "(SGAT), 4 = gradient tuning (GDAT, also --simulate), see docs/tune.md; also --job_type")
      ->default_val(2);
  app.add_option("--model", a.model, "operator list JSON (see docs/tune.md) or a profile folder from `portkit prof`");
  app.add_option("--replay", a.replay, "run the strategy on a recorded landscape instead of compiling and measuring");
  app.add_option("--strategy", opt.strategy, "search strategy (see below)")->default_val(tune::kDefaultStrategy);
  app.add_option("--strategy-opt", opt.strategy_options, "strategy option NAME=VALUE (repeatable)");
  app.add_option("--max-evals", opt.max_evals, "candidates evaluated per operator")
      ->default_val(tune::kDefaultMaxEvals)
      ->check(CLI::PositiveNumber);
  app.add_option("--max-seconds", opt.max_seconds, "time limit per operator in seconds (0 = none)")
      ->default_val(0)
      ->check(CLI::NonNegativeNumber);
  app.add_option("--patience", opt.patience,
                 "stop an operator after this many evaluations without a new best (0 = never)")
      ->default_val(tune::kDefaultPatience)
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", opt.seed, "random seed of the strategies")->default_val(0);
  app.add_option("--parallel-compile", a.parallel,
                 "compiler processes at once, at least 1 (default $TE_PARALLEL_COMPILER, else the core count)")
      ->check(CLI::Range(1, 4096));
  AddJobsOption(app, &a.parallel)->description("same as --parallel-compile");
  app.add_option("--tune-bank", a.bank_flag,
                 "knowledge base folder or tune_bank.db file (default $TUNE_BANK_PATH, else $XDG_CACHE_HOME/portkit or "
                 "~/.cache/portkit)");
  app.add_flag("--lookup-only", opt.lookup_only,
               "only use the bank's entries (opened read-only): nothing is tuned or stored");
  app.add_flag("--repeat-tune", opt.repeat_tune,
               "re-tune operators found in the bank; replace only if better (also REPEAT_TUNE=True)");
  app.add_option("--output", a.output, "folder for the result file, tuned_plan.json and the landscape")
      ->default_val(".");
  app.add_option("--record", a.record, "landscape file of every measurement (default OUTPUT/tune_landscape.jsonl)");
  app.add_flag("--force", a.force, "replace tuned_plan.json / tune_report.json in --output that portkit did not write");
  app.add_option("--fix", opt.fixes, "restrict a knob: NAME=V1[,V2...] (repeatable)");
  app.add_option("--repeats", opt.repeats, "timed repeats per candidate (median reported)")
      ->default_val(7)
      ->check(CLI::Range(5, 1000));
  app.add_option("--compiler", opt.compiler, "C++ compiler for candidates")->default_val("c++");
  app.add_flag("--list-strategies", a.list_strategies, "print the strategies and their options");
  AddFormatOption(app, &a.formats, {"text", "json"}, {"text"})
      ->description(
          "text: the table on the console; json: OUTPUT/tune_report.json, the whole report (comma list "
          "for both; default text)");
  app.footer(tune::StrategyHelp() +
             "\nKnowledge base sub-commands (portkit tune bank SUB --help):\n"
             "  bank list [--format json]   the entries (default)\n"
             "  bank show OP                every field of an operator's entries (signature, name or type)\n"
             "  bank export FILE            write the entries to a JSON file\n"
             "  bank import FILE            merge a JSON file of entries (an entry replaces one only if faster)\n"
             "\nPyTorch models (SGAT, --job-type=1): portkit tune --framework=pytorch --model=pkg.module:make_model "
             "--input 8x3x224x224 --output DIR (see portkit tune --framework=pytorch --help).\n"
             "\nEnvironment: TUNE_BANK_PATH, REPEAT_TUNE=True, TE_PARALLEL_COMPILER=N.");
}

/// `portkit tune bank`: its sub-commands and their flag spellings.
struct BankCli {
  BankArgs args;
  std::string show, export_file, import_file;
  bool list_flag = false;
  CLI::App* bank = nullptr;
  CLI::App* list = nullptr;
};

void AddBankCommand(CLI::App& app, BankCli& b, std::string* bank_flag) {
  b.bank = app.add_subcommand("bank", "inspect and share a knowledge base: list, show OP, export FILE, import FILE");
  CLI::App* bank = b.bank;
  bank->fallthrough();
  bank->footer(
      "The bank folder is --tune-bank DIR (or a tune_bank.db file), else $TUNE_BANK_PATH, else "
      "$XDG_CACHE_HOME/portkit or ~/.cache/portkit. list, show and export open it read-only.");
  bank->add_option("--tune-bank", *bank_flag, "knowledge base folder or tune_bank.db file");
  AddFormatOption(*bank, &b.args.formats, {"text", "json"}, {"text"});
  bank->add_flag("--list", b.list_flag, "same as `bank list`");
  bank->add_option("--show", b.show, "same as `bank show OP`");
  bank->add_option("--export", b.export_file, "same as `bank export FILE`");
  bank->add_option("--import", b.import_file, "same as `bank import FILE`");
  bank->add_flag("--force", b.args.force,
                 "export: replace FILE even when `bank export` did not write it (refused otherwise)");
  bank->add_option("--max-string-mb", b.args.max_string_mb,
                   "the longest string read from the bank, in MiB (default 1); an entry with a longer one is left "
                   "out")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1024}));
  b.list = bank->add_subcommand("list", "list the entries (the default)");
  auto* bank_show = bank->add_subcommand("show", "every field of the entries of an operator");
  bank_show->add_option("op", b.show, "signature, op name or op type")->required();
  auto* bank_export = bank->add_subcommand("export", "write the entries to a JSON file");
  bank_export->add_option("file", b.export_file, "JSON file to write")->required();
  auto* bank_import =
      bank->add_subcommand("import", "merge a JSON file of entries; an entry replaces one only if faster");
  bank_import->add_option("file", b.import_file, "JSON file written by `bank export`")->required();
  bank->require_subcommand(0, 1);
  for (auto* sub : {b.list, bank_show, bank_export, bank_import}) {
    sub->fallthrough();
    sub->footer("");
  }
}

/// The one action the bank's sub-commands and flags name, run.
int RunBankCli(BankCli& b, const std::string& bank_flag, Context& ctx) {
  int actions = (b.list_flag || b.list->parsed()) + !b.show.empty() + !b.export_file.empty() + !b.import_file.empty();
  if (actions > 1) return Fail(ctx, InvalidArgument("tune bank: give one of list, show, export, import"));
  if (!b.show.empty()) b.args.action = BankAction::kShow, b.args.argument = b.show;
  else if (!b.export_file.empty()) b.args.action = BankAction::kExport, b.args.argument = b.export_file;
  else if (!b.import_file.empty()) b.args.action = BankAction::kImport, b.args.argument = b.import_file;
  return BankCommand(b.args, bank_flag, ctx);
}

/// REPEAT_TUNE and TE_PARALLEL_COMPILER (AOE's environment) where the options do not say.
Status ReadEnvironment(TuneArgs& a) {
  a.opt.repeat_tune = a.opt.repeat_tune || EnvTrue("REPEAT_TUNE");
  if (a.parallel <= 0) {
    if (const char* env = std::getenv("TE_PARALLEL_COMPILER"); env && *env) {
      char* end = nullptr;
      long v = std::strtol(env, &end, 10);
      if (*end || v < 1 || v > 256)
        return InvalidArgument("TE_PARALLEL_COMPILER=" + std::string(env) +
                               ": expected a number of jobs from 1 to 256");
      a.parallel = static_cast<int>(v);
    } else {
      a.parallel = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    }
  }
  a.opt.parallel_compile = a.parallel;
  a.opt.model = a.model;
  a.opt.replay = a.replay;
  a.opt.bank = tune::BankDir(a.bank_flag);
  return Status::Ok();
}

/// Every option and path, before the op list is read, the bank opened or any output created.
/// `fixed_names`: the files of --output with fixed names (the result file's name is new each run),
/// which follow the overwrite policy.
Status CheckTuneArgs(const TuneArgs& a, const std::vector<std::string>& fixed_names) {
  PORTKIT_RETURN_IF_ERROR(tune::ValidateTuneOptions(a.opt));
  if (!a.model.empty()) PORTKIT_RETURN_IF_ERROR(CheckInput(a.model, "--model"));
  if (!a.replay.empty()) PORTKIT_RETURN_IF_ERROR(CheckInput(a.replay, "--replay", PathKind::kFile));
  PORTKIT_RETURN_IF_ERROR(CheckOutputFolder(a.output, "--output"));
  if (!a.record.empty()) PORTKIT_RETURN_IF_ERROR(CheckOutputFile(a.record, "--record"));
  if (!a.opt.lookup_only)
    if (Status st = CheckOutputFolder(BankFolder(a.opt.bank), "--tune-bank"); !st.ok())
      return Status(st.code(), st.message() +
                                   "; tuning stores its results in the bank: give --lookup-only to only use its "
                                   "entries, or another --tune-bank");
  return CheckReplaceableIn(a.output, fixed_names, "--output", a.force);
}

/// Runs the tuning and writes its files: the result file as tuning proceeds (before the first
/// operator and after each one, "tuning in progress", so that a killed run leaves a valid file
/// saying so), then the result, the plan and the JSON report; the table on stdout.
int RunAndRender(TuneArgs& a, const std::vector<std::string>& fixed_names, Context& ctx) {
  const fs::path output = a.output;
  fs::path result_path = output / render::TuneResultFileName(ctx.clock(), static_cast<long>(getpid()));
  fs::path plan_path = output / "tuned_plan.json";
  tune::SessionResult last;
  bool progress_written = false;
  a.opt.on_progress = [&](const tune::SessionResult& so_far) -> Status {
    last = so_far;
    Status st = WriteFileAtomic(result_path, render::TuneResultJson(so_far, "tuning in progress"));
    if (!st.ok()) return IoError("cannot write the result file: " + st.message());
    progress_written = true;
    return Status::Ok();
  };
  auto report = tune::RunTune(a.opt, ctx);
  if (!report.ok()) {
    // Say in the result file that the run failed (best effort: the failure may be a full disk).
    if (progress_written)
      (void)WriteFileAtomic(result_path, render::TuneResultJson(last, "tuning failed", report.status().message()));
    return Fail(ctx, report.status());
  }
  for (const auto& [path, text] : {std::pair{result_path, render::TuneResultJson(report->session)},
                                   std::pair{plan_path, render::TunedPlanJson(report->session)}}) {
    if (Status st = WriteFileAtomic(path, text); !st.ok())
      return Fail(ctx, Status(ErrorCode::kInternal, "run failed: " + st.message()));
    report->files_written.push_back(path);
  }
  if (!report->landscape.empty()) ctx.logger.Info("Landscape: " + report->landscape.string());
  if (Wants(a.formats, "json")) {
    fs::path json_path = output / "tune_report.json";
    report->files_written.push_back(json_path);
    if (Status st = WriteFileAtomic(json_path, render::TuneReportJson(*report)); !st.ok()) return Fail(ctx, st);
    ctx.logger.Info("Report: " + json_path.string());
  }
  if (Status st = RecordWritten(a.output, fixed_names); !st.ok()) return Fail(ctx, st);
  if (Wants(a.formats, "text")) Print(render::TuneTable(*report));
  ctx.logger.Info("Result: " + result_path.string() + "; plan: " + plan_path.string() + ".");
  ctx.logger.Info(render::TuneSummaryLine(*report));
  return kExitOk;
}

}  // namespace

int TuneCommand(int argc, char** argv, Context& ctx) {
  // --job-type=4 (GDAT, cli/tune_gdat.cc) before --framework=pytorch (SGAT/OPAT, cli/tune_pytorch.cc):
  // a GDAT run names the framework too.
  if (WantsGdat(argc, argv)) return TuneGdatCommand(argc, argv, ctx);
  if (WantsPytorchFramework(argc, argv)) return TunePytorchCommand(argc, argv, ctx);
  CLI::App app{
      "Operator auto-tuning (AOE's OPAT): tunes MatMul and Conv2D kernels compiled and measured on this "
      "machine, keeping the best strategies in a knowledge base.\n"
      "Sub-commands: `tune bank list | show OP | export FILE | import FILE` inspect and share the "
      "knowledge base.",
      "portkit tune"};
  TuneArgs a;
  AddTuneOptions(app, a);
  BankCli bank;
  AddBankCommand(app, bank, &a.bank_flag);
  if (auto code = Parse(app, argc, argv)) return *code;

  if (bank.bank->parsed()) return RunBankCli(bank, a.bank_flag, ctx);
  if (a.list_strategies) {
    Print(tune::StrategyHelp());
    return kExitOk;
  }
  // SGAT and GDAT are reached through --framework=pytorch (tune_pytorch.cc) and --job-type=4
  // (tune_gdat.cc); --job-type=1 without --framework lands here.
  if (a.opt.job_type == 1)
    return Fail(ctx, InvalidArgument("--job-type=1 (subgraph tuning, SGAT) tunes a PyTorch model: give "
                                     "--framework=pytorch with --model=pkg.module:make_model and --input SHAPE "
                                     "(portkit tune --framework=pytorch --help)"));
  if (Status st = ReadEnvironment(a); !st.ok()) return Fail(ctx, st);
  std::vector<std::string> fixed_names = {"tuned_plan.json"};
  if (Wants(a.formats, "json")) fixed_names.push_back("tune_report.json");
  if (Status st = CheckTuneArgs(a, fixed_names); !st.ok()) return Fail(ctx, st);

  std::error_code ec;
  fs::create_directories(a.output, ec);
  if (ec) return Fail(ctx, IoError("cannot create --output " + a.output + ": " + ec.message()));
  if (a.replay.empty())
    a.opt.record = a.record.empty() ? fs::path(a.output) / "tune_landscape.jsonl" : fs::path(a.record);
  return RunAndRender(a, fixed_names, ctx);
}

}  // namespace portkit::cli
