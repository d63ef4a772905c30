#include "cli/tune_gdat.h"

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "core/output_policy.h"
#include "target/target_facts.h"
#include "tune/api.h"

namespace portkit::cli {
namespace fs = std::filesystem;

bool WantsGdat(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    for (const char* name : {"--job-type", "--job_type"}) {
      std::string n = name;
      if (a == n + "=4") return true;
      if (a == n && i + 1 < argc && std::string(argv[i + 1]) == "4") return true;
    }
  }
  return false;
}

namespace {

/// The command line's values; paths are strings as given (the checks name them so).
struct GdatArgs {
  tune::GdatOptions options;
  int job_type = 4;
  std::string simulate, describe, output = ".";
  bool force = false;  // replace gdat_settings.json / the --describe file that portkit did not write
};

/// The options that say what GDAT runs on, and where its results go.
void AddRunOptions(CLI::App& app, GdatArgs& a, Context& ctx) {
  tune::GdatOptions& o = a.options;
  app.add_option("--job-type", a.job_type, "4 = gradient tuning (GDAT); also --job_type")->default_val(4);
  app.add_option("--framework", o.framework, "pytorch (DDP)")->default_val("pytorch");
  app.add_option(
      "--model", o.model,
      "pkg.module:callable returning the nn.Module to train (imported from the current folder or PYTHONPATH)");
  app.add_option("--input", o.inputs, "input shape(s): 8x3x32x32, int64:8x128, comma list or repeated");
  app.add_option("--simulate", a.simulate,
                 "tune on a cost-model description (JSON, docs/tune.md GDAT) instead of real training");
  app.add_option("--describe", a.describe,
                 "measure a cost-model description of --model on this machine (per-layer backward, forward, optimizer, "
                 "copy and cast costs) into this JSON file instead of tuning; then --simulate it");
  app.add_option("--alpha-ms", o.alpha_ms, "--describe: all-reduce latency (ms) of the cluster to simulate")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--beta-ms-per-mb", o.beta_ms_per_mb, "--describe: all-reduce cost per MiB (ms) of that cluster")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--measure-comm", o.measure_comm,
               "--describe: measure alpha and beta with --nproc local ranks (--backend)");
  app.add_option("--nproc", o.nproc, "processes (ranks) started on this machine")
      ->default_val(2)
      ->check(CLI::Range(1, 256));
  app.add_option("--backend", o.backend,
                 "process group backend: gloo (CPU), CUDA's, or one of the target's (distributed_backends of its "
                 "target.json)")
      ->default_val("gloo");
  app.add_option("--target", o.target, target::TargetOptionHelp(ctx.data_dir, false))
      ->check([&ctx](const std::string& v) { return target::CheckTargetChoice(ctx.data_dir, v, false); });
  app.add_option("--output", a.output, "folder for aoe_result_gdat_*.json and gdat_settings.json")->default_val(".");
  app.add_option("--python", o.python, "Python interpreter with torch (default $PORTKIT_PYTHON, else python3)");
}

/// The options of the search and of the training steps.
void AddSearchOptions(CLI::App& app, GdatArgs& a) {
  tune::GdatOptions& o = a.options;
  app.add_option("--warmup", o.warmup, "untimed steps after each DDP rebuild")
      ->default_val(2)
      ->check(CLI::Range(1, 1000));
  app.add_option("--measure", o.measure, "timed steps per point (median)")->default_val(5)->check(CLI::Range(1, 10000));
  app.add_option("--max-trials", o.max_trials, "points measured at most (0 = until the search converges)")
      ->default_val(0)
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--allow-lossy", o.allow_lossy, "also try the fp16 and PowerSGD hooks (they change the gradients)");
  app.add_flag("--force", a.force,
               "replace OUTPUT/gdat_settings.json or the --describe file when portkit did not write it");
  app.add_flag("--exhaustive", o.exhaustive,
               "--simulate: also evaluate every point and say whether the search found the optimum");
  app.add_option("--bucket-caps", o.bucket_caps, "bucket_cap_mb values, MiB (default 1,2,5,10,25,50,100)");
  app.add_option("--first-buckets", o.first_buckets, "first bucket caps, MiB (default 0.25,1,4,16)");
  app.add_option("--bucket-views", o.bucket_views, "gradient_as_bucket_view values (default 0,1)");
  app.add_option("--static-graphs", o.static_graphs, "static_graph values (default 0,1)");
  app.add_option("--powersgd-ranks", o.powersgd_ranks, "PowerSGD ranks tried with --allow-lossy (default 1,4)");
  app.add_option("--lr", o.lr, "SGD learning rate of the training steps")->default_val(0.01);
  app.add_option("--seed", o.seed, "seed of the model and of the random batches")->default_val(0);
  app.add_option("--timeout", o.timeout, "seconds before a stuck rank is ended")
      ->default_val(600)
      ->check(CLI::PositiveNumber);
}

/// Every option and path, before anything is created.
Status CheckArgs(const GdatArgs& a, Context& ctx) {
  if (a.job_type != 4) return InvalidArgument("--job-type must be 4 for GDAT");
  PORTKIT_RETURN_IF_ERROR(tune::ValidateGdatOptions(a.options, ctx.data_dir));
  if (!a.simulate.empty()) PORTKIT_RETURN_IF_ERROR(CheckInput(a.simulate, "--simulate", PathKind::kFile));
  if (!a.describe.empty()) PORTKIT_RETURN_IF_ERROR(CheckOutputFile(a.describe, "--describe"));
  else PORTKIT_RETURN_IF_ERROR(CheckOutputFolder(a.output, "--output"));
  // The one fixed-name file each mode writes (the result file's name is new each run).
  return CheckReplaceable(tune::GdatWrittenFile(a.options), a.describe.empty() ? "--output" : "--describe", a.force);
}

}  // namespace

int TuneGdatCommand(int argc, char** argv, Context& ctx) {
  CLI::App app{
      "Gradient tuning (AOE's GDAT, --job-type=4): tunes DDP's bucket_cap_mb, first bucket size, "
      "gradient_as_bucket_view, static_graph and (with --allow-lossy) the fp16 / PowerSGD comm hooks, so "
      "that gradient all-reduce overlaps the backward pass. Online over the first steps of real DDP "
      "training (--model), or on a cost model (--simulate).",
      "portkit tune --job-type=4"};
  GdatArgs a;
  AddRunOptions(app, a, ctx);
  AddSearchOptions(app, a);
  app.footer(
      "Writes OUTPUT/aoe_result_gdat_{timestamp}_pid{pid}.json (rewritten after every trial) and\n"
      "OUTPUT/gdat_settings.json; apply it with portkit.gdat.make_ddp(model, portkit.gdat.load_settings(FILE)).\n"
      "Environment: PORTKIT_PYTHON (interpreter), PORTKIT_PYTHON_DIR (companion package folder).");
  if (auto code = Parse(app, argc, argv)) return *code;
  a.options.simulate = a.simulate;
  a.options.describe = a.describe;
  a.options.output = a.output;

  if (Status st = CheckArgs(a, ctx); !st.ok()) return Fail(ctx, st);
  auto report = tune::RunGdat(a.options, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  switch (report->companion.end) {
    case tune::CompanionEnd::kOk:
      if (Status st = RecordWrittenFile(report->written); !st.ok()) return Fail(ctx, st);
      return kExitOk;
    case tune::CompanionEnd::kRefused: return kExitUsage;  // the companion said why
    case tune::CompanionEnd::kFailed: break;
  }
  ctx.logger.Error(report->companion.failure);
  return kExitFailure;
}

}  // namespace portkit::cli
