#include "tune/tune_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/atomic_file.h"
#include "core/table.h"
#include "tune/knowledge_base.h"
#include "tune/landscape.h"
#include "tune/op_desc.h"
#include "tune/prof_input.h"
#include "tune/report.h"
#include "tune/session.h"
#include "tune/strategies/strategy.h"

#ifndef PORTKIT_VERSION_STRING
#define PORTKIT_VERSION_STRING "0.0.0"
#endif

namespace portkit::tune {
namespace fs = std::filesystem;
namespace {

bool EnvTrue(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return false;
  std::string s(v);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s == "true" || s == "1" || s == "yes";
}

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct BankArgs {
  bool list = false;
  std::string show, export_file, import_file;
};

int Bank(const BankArgs& a, const std::string& bank_flag, Logger& log) {
  fs::path dir = BankDir(bank_flag);
  auto kb = KnowledgeBase::Open(dir);
  if (!kb.ok()) {
    log.Error(kb.status().message());
    return 1;
  }
  if (!a.import_file.empty()) {
    auto text = ReadFile(a.import_file);
    if (!text.ok()) {
      log.Error(text.status().message());
      return 2;
    }
    auto entries = EntriesFromJson(*text, a.import_file);
    if (!entries.ok()) {
      log.Error(entries.status().message());
      return 2;
    }
    int added = 0, updated = 0, kept = 0;
    for (const auto& e : *entries) {
      auto st = kb->StoreIfBetter(e);
      if (!st.ok()) {
        log.Error(st.status().message());
        return 1;
      }
      (*st == StoreOutcome::kAdded ? added : *st == StoreOutcome::kUpdated ? updated : kept)++;
    }
    log.Info("Imported " + a.import_file + " into " + kb->path().string() + ": " + std::to_string(added) + " added, " +
             std::to_string(updated) + " updated (faster), " + std::to_string(kept) + " kept (not faster).");
    return 0;
  }
  auto entries = kb->List();
  if (!entries.ok()) {
    log.Error(entries.status().message());
    return 1;
  }
  if (!a.export_file.empty()) {
    if (Status st = WriteFileAtomic(a.export_file, EntriesToJson(*entries)); !st.ok()) {
      log.Error(st.message());
      return 1;
    }
    log.Info("Exported " + std::to_string(entries->size()) + " entries to " + a.export_file + ".");
    return 0;
  }
  if (!a.show.empty()) {
    int shown = 0;
    for (const auto& e : *entries) {
      if (e.op_key != a.show && e.op_name != a.show && e.op_type != a.show) continue;
      ++shown;
      std::printf("op_key:     %s\nop_name:    %s\nop_type:    %s\nstrategy:   %s\ntime:       %.3f us (default %.3f us, "
                  "%s faster)\nvalidators: %s\nupdated:    %s\n\n",
                  e.op_key.c_str(), e.op_name.c_str(), e.op_type.c_str(), e.config.c_str(), e.time_us, e.default_us,
                  Percent((e.default_us - e.time_us) / e.default_us * 100).c_str(), e.validators.c_str(),
                  e.updated.c_str());
    }
    if (!shown) {
      log.Error("no entry for '" + a.show + "' in " + kb->path().string() +
                " (give an op_key, op_name or op_type as listed by --list)");
      return 1;
    }
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : *entries)
    rows.push_back({e.op_type, e.op_name, e.op_key, Fmt("%.2f", e.time_us), Fmt("%.2f", e.default_us), e.config});
  std::string table = RenderTable({"type", "name", "signature", "us", "default us", "strategy"}, rows);
  std::fwrite(table.data(), 1, table.size(), stdout);
  std::printf("%zu entries in %s\n", entries->size(), kb->path().string().c_str());
  return 0;
}

}  // namespace

int TuneMain(int argc, char** argv, Context& ctx) {
  Logger& log = ctx.logger;
  CLI::App app{"Operator auto-tuning (seed 004, AOE's OPAT): tunes MatMul and Conv2D kernels compiled and measured "
               "on this machine, keeping the best strategies in a knowledge base.",
               "portkit tune"};
  int job_type = 2;
  std::string model, replay, output = ".", bank_flag, record, compiler = "c++";
  SessionOptions opt;
  opt.budget.max_evals = 40;
  opt.budget.patience = 25;
  int parallel = 0;
  bool repeat = false, list_strategies = false;
  app.add_option("--job-type", job_type, "2 = operator tuning (OPAT); also --job_type")->default_val(2);
  app.add_option("--model", model, "operator list JSON (see docs/tune.md) or a profile folder from `portkit prof`");
  app.add_option("--replay", replay, "run the strategy on a recorded landscape instead of compiling and measuring");
  app.add_option("--strategy", opt.strategy, "search strategy (see below)")->default_val("genetic");
  app.add_option("--strategy-opt", opt.strategy_options, "strategy option NAME=VALUE (repeatable)");
  app.add_option("--max-evals", opt.budget.max_evals, "candidates evaluated per operator")->default_val(40)->check(CLI::PositiveNumber);
  app.add_option("--max-seconds", opt.budget.max_seconds, "time limit per operator in seconds (0 = none)")->default_val(0)->check(CLI::NonNegativeNumber);
  app.add_option("--patience", opt.budget.patience, "stop an operator after this many evaluations without a new best (0 = never)")
      ->default_val(25)->check(CLI::NonNegativeNumber);
  app.add_option("--seed", opt.seed, "random seed of the strategies")->default_val(0);
  app.add_option("--parallel-compile", parallel, "compiler processes at once (default $TE_PARALLEL_COMPILER, else the core count)");
  app.add_option("--tune-bank", bank_flag, "knowledge base folder (default $TUNE_BANK_PATH, else $XDG_CACHE_HOME/portkit or ~/.cache/portkit)");
  app.add_flag("--repeat-tune", repeat, "re-tune operators found in the bank; replace only if better (also REPEAT_TUNE=True)");
  app.add_option("--output", output, "folder for the result file and tuned_plan.json")->default_val(".");
  app.add_option("--record", record, "landscape file of every measurement (default OUTPUT/tune_landscape.jsonl)");
  app.add_option("--fix", opt.fixes, "restrict a knob: NAME=V1[,V2...] (repeatable)");
  app.add_option("--repeats", opt.measure.repeats, "timed repeats per candidate (median reported)")->default_val(7)->check(CLI::Range(5, 1000));
  app.add_option("--compiler", compiler, "C++ compiler for candidates")->default_val("c++");
  app.add_flag("--list-strategies", list_strategies, "print the strategies and their options");
  app.footer(StrategyHelp() + "\nEnvironment: TUNE_BANK_PATH, REPEAT_TUNE=True, TE_PARALLEL_COMPILER=N.");
  BankArgs bank_args;
  auto* bank = app.add_subcommand("bank", "inspect and share a knowledge base");
  bank->add_flag("--list", bank_args.list, "list the entries (default)");
  bank->add_option("--show", bank_args.show, "details of the entries of an operator (signature, name or type)");
  bank->add_option("--export", bank_args.export_file, "write the entries to a JSON file");
  bank->add_option("--import", bank_args.import_file, "merge a JSON file of entries (an entry replaces one only if faster)");
  bank->add_option("--tune-bank", bank_flag, "knowledge base folder");

  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--job_type", 0) == 0) a = "--job-type" + a.substr(10);
    args.push_back(a);
  }
  std::vector<const char*> cargv;
  for (auto& a : args) cargv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(cargv.size()), const_cast<char**>(cargv.data()));
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (bank->parsed()) return Bank(bank_args, bank_flag, log);
  if (list_strategies) {
    std::fputs(StrategyHelp().c_str(), stdout);
    return 0;
  }
  if (job_type != 2) {
    log.Error("--job-type=" + std::to_string(job_type) + ": only operator tuning (2) is supported; subgraph tuning (1) is not");
    return 2;
  }
  if (model.empty() && replay.empty()) {
    log.Error("give --model FILE (an operator list or a profile folder) or --replay LANDSCAPE; see portkit tune --help");
    return 2;
  }
  opt.repeat_tune = repeat || EnvTrue("REPEAT_TUNE");
  if (parallel <= 0) {
    if (const char* env = std::getenv("TE_PARALLEL_COMPILER"); env && *env) {
      char* end = nullptr;
      long v = std::strtol(env, &end, 10);
      if (*end || v < 1 || v > 256) {
        log.Error("TE_PARALLEL_COMPILER=" + std::string(env) + ": expected a number of jobs from 1 to 256");
        return 2;
      }
      parallel = static_cast<int>(v);
    } else {
      parallel = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    }
  }
  opt.hardware_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  opt.portkit_version = PORTKIT_VERSION_STRING;
  opt.budget.batch = parallel;

  std::optional<Landscape> landscape;
  OpList list;
  if (!replay.empty()) {
    auto text = ReadFile(replay);
    if (!text.ok()) {
      log.Error(text.status().message());
      return 2;
    }
    auto parsed = ParseLandscape(*text, replay);
    if (!parsed.ok()) {
      log.Error(parsed.status().message());
      return 2;
    }
    landscape = std::move(*parsed);
    list.name = fs::path(replay).stem().string();
    list.ops = landscape->ops;
  }
  if (!model.empty()) {
    std::error_code ec;
    Expected<OpList> parsed = fs::is_directory(model, ec) ? OpsFromProfile(model) : [&]() -> Expected<OpList> {
      auto text = ReadFile(model);
      if (!text.ok()) return text.status();
      return ParseOpList(*text, model);
    }();
    if (!parsed.ok()) {
      log.Error(parsed.status().message());
      return 2;
    }
    list = std::move(*parsed);
  }
  for (const auto& u : list.untuned) log.Warning(u.op.name + " (" + u.op.type + ") is not tuned: " + u.reason);
  if (list.ops.empty() && list.untuned.empty())
    log.Warning((landscape ? replay : model) + ": no operators to tune");

  // The output folder and the landscape file are checked before any tuning (or bank write), so
  // that an unwritable --output fails at once instead of after the measurements.
  {
    std::error_code ec;
    fs::create_directories(output, ec);
    if (ec || !fs::is_directory(output, ec)) {
      log.Error("cannot create --output " + output + (ec ? ": " + ec.message() : ": not a folder"));
      return 1;
    }
    fs::path probe = fs::path(output) / (".portkit_tune_probe_" + std::to_string(getpid()));
    if (Status st = WriteFileAtomic(probe, ""); !st.ok()) {
      log.Error("cannot write to --output " + output + ": " + st.message());
      return 1;
    }
    fs::remove(probe, ec);
  }
  fs::path record_path = record.empty() ? fs::path(output) / "tune_landscape.jsonl" : fs::path(record);
  Landscape recorded;
  if (!landscape) {
    if (Status st = recorded.StreamTo(record_path); !st.ok()) {
      log.Error(st.message());
      return 1;
    }
  }

  fs::path bank_dir = BankDir(bank_flag);
  auto kb = KnowledgeBase::Open(bank_dir);
  if (!kb.ok()) {
    log.Error(kb.status().message());
    return 1;
  }
  opt.build.compiler = compiler;
  opt.build.cache_dir = bank_dir / "kernels";
  opt.build.parallel = parallel;
  log.Info("Tuning " + std::to_string(list.ops.size()) + " operators with strategy " + opt.strategy + " (max " +
           std::to_string(opt.budget.max_evals) + " evaluations each" +
           (landscape ? ", replaying " + replay : ", " + std::to_string(parallel) + " parallel compiles") +
           "); knowledge base " + kb->path().string() + (opt.repeat_tune ? " (repeat tune)" : "") + ".");
  auto result = RunSession(list, opt, *kb, landscape ? &*landscape : nullptr, landscape ? nullptr : &recorded, log);
  if (!result.ok()) {
    log.Error(result.status().message());
    return result.status().code() == ErrorCode::kInvalidArgument ? 2 : 1;
  }
  fs::path result_path = fs::path(output) / ResultFileName(ctx.clock(), static_cast<long>(getpid()));
  fs::path plan_path = fs::path(output) / "tuned_plan.json";
  for (auto [path, text] : {std::pair{result_path, ResultJson(*result)}, {plan_path, PlanJson(*result)}}) {
    if (Status st = WriteFileAtomic(path, text); !st.ok()) {
      log.Error(st.message());
      return 1;
    }
  }
  if (!landscape) {
    // The streamed file holds every measurement in order; rewrite it sorted and deduplicated.
    recorded.CloseStream();
    if (Status st = WriteFileAtomic(record_path, recorded.ToJsonLines()); !st.ok()) {
      log.Error(st.message());
      return 1;
    }
    log.Info("Landscape: " + record_path.string());
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& op : result->ops)
    rows.push_back({op.op.name, op.op.type, RepoStatusName(op.status), Fmt("%.2f", op.before_us),
                    Fmt("%.2f", op.after_us),
                    Percent(op.before_us > 0 ? (op.before_us - op.after_us) / op.before_us * 100 : 0),
                    std::to_string(op.evaluations)});
  for (const auto& u : result->untuned) rows.push_back({u.op.name, u.op.type, "untuned", "-", "-", "-", "0"});
  std::string table = RenderTable({"operator", "type", "repo", "before us", "after us", "gain", "evals"}, rows);
  std::fwrite(table.data(), 1, table.size(), stdout);
  log.Info("Result: " + result_path.string() + "; plan: " + plan_path.string() + ".");
  ModelTotals t = Totals(*result);
  log.Info("Aoe process finished, model performance " + Fmt("%.3f", t.baseline_ms) + " ms -> " +
           Fmt("%.3f", t.result_ms) + " ms, improvement " + Percent(t.improvement_percent()) + ".");
  return 0;
}

}  // namespace portkit::tune
