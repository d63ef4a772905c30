#include "cli/tune_gdat.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "analyse/target.h"
#include "cli/cli_common.h"
#include "core/output_policy.h"
#include "core/subprocess.h"
#include "target/target_facts.h"

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

struct GdatArgs {
  int job_type = 4;
  std::string framework = "pytorch";
  std::string model, simulate, describe, output = ".", python, backend = "gloo", target;
  double alpha_ms = -1, beta_ms_per_mb = -1;
  bool measure_comm = false;
  std::vector<std::string> inputs;
  int nproc = 2, warmup = 2, measure = 5, max_trials = 0, seed = 0;
  double lr = 0.01, timeout = 600;
  bool allow_lossy = false, exhaustive = false;
  bool force = false;  // replace gdat_settings.json / the --describe file that portkit did not write
  std::string bucket_caps, first_buckets, bucket_views, static_graphs, powersgd_ranks;
};

/// "a.b:c" with non-empty dotted module and attribute names.
bool IsFactorySpec(const std::string& s) {
  auto colon = s.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (c == '.' && i < colon) || i == colon;
    if (!ok) return false;
  }
  return true;
}

Status Validate(const GdatArgs& a) {
  if (a.job_type != 4) return InvalidArgument("--job-type must be 4 for GDAT");
  if (a.framework != "pytorch")
    return InvalidArgument("--framework " + a.framework + ": GDAT is implemented for pytorch only (DDP)");
  if (!a.describe.empty() && a.model.empty())
    return InvalidArgument("--describe needs --model pkg.module:make_model and --input (the model to measure)");
  if (!a.describe.empty() && !a.simulate.empty()) return InvalidArgument("give --describe or --simulate, not both");
  if ((a.alpha_ms >= 0) != (a.beta_ms_per_mb >= 0))
    return InvalidArgument("--alpha-ms and --beta-ms-per-mb go together");
  if ((a.alpha_ms >= 0 || a.measure_comm) && a.describe.empty())
    return InvalidArgument("--alpha-ms, --beta-ms-per-mb and --measure-comm apply to --describe only");
  if (a.alpha_ms >= 0 && a.measure_comm)
    return InvalidArgument("give --alpha-ms/--beta-ms-per-mb or --measure-comm, not both");
  if (a.simulate.empty() == a.model.empty())
    return InvalidArgument(
        "GDAT needs either --model pkg.module:make_model with --input (tune real DDP training) or "
        "--simulate MODEL.json (tune on the cost model), not both");
  if (!a.model.empty()) {
    if (!IsFactorySpec(a.model))
      return InvalidArgument("--model " + a.model +
                             ": expected pkg.module:callable (a function returning an nn.Module)");
    if (a.inputs.empty()) return InvalidArgument("--model needs --input SHAPE (e.g. --input 8x3x32x32)");
  }
  if (a.exhaustive && a.simulate.empty()) return InvalidArgument("--exhaustive applies to --simulate only");
  return Status();
}

/// The device a process-group backend runs on, from the data: torch's CPU backend (gloo) needs
/// none; CUDA's backends (data/cuda/cuda_only.json) run on CUDA; the target's (its
/// distributed_backends and renames) on the target's device, after importing its module.
struct BackendDevice {
  std::string device_type;  ///< empty: the CPU
  std::string import;       ///< module that registers the backend ("torch_npu"), may be empty
};

Expected<BackendDevice> DeviceOfBackend(const analyse::Target& t, const std::string& backend) {
  const std::string kCpuBackend = "gloo";  // torch's own CPU backend, present in every build
  if (backend == kCpuBackend) return BackendDevice{};
  std::set<std::string> choices = {kCpuBackend};
  const auto& cuda = t.cuda().distributed_backends;
  choices.insert(cuda.begin(), cuda.end());
  std::set<std::string> own(t.facts().distributed_backends.begin(), t.facts().distributed_backends.end());
  for (const auto& [from, to] : t.facts().renames.distributed_backends) own.insert(to);
  if (!t.facts().accelerator()) own.clear();
  choices.insert(own.begin(), own.end());
  if (std::find(cuda.begin(), cuda.end(), backend) != cuda.end() && !t.cuda().device_types.empty())
    return BackendDevice{t.cuda().device_types.front(), ""};
  if (own.count(backend)) return BackendDevice{t.facts().device_type, t.facts().python_module};
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  return InvalidArgument("--backend " + backend + ": not a process-group backend of target " + t.name() + " (" +
                         t.facts().file().string() + "); choose one of " + list);
}

/// Shortest decimal that reads back as `v` (to_string would cut 1e-5 to 0.000010 and beyond).
std::string Number(double v) {
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
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
  app.add_option("--job-type", a.job_type, "4 = gradient tuning (GDAT); also --job_type")->default_val(4);
  app.add_option("--framework", a.framework, "pytorch (DDP)")->default_val("pytorch");
  app.add_option(
      "--model", a.model,
      "pkg.module:callable returning the nn.Module to train (imported from the current folder or PYTHONPATH)");
  app.add_option("--input", a.inputs, "input shape(s): 8x3x32x32, int64:8x128, comma list or repeated");
  app.add_option("--simulate", a.simulate,
                 "tune on a cost-model description (JSON, docs/tune.md GDAT) instead of real training");
  app.add_option("--describe", a.describe,
                 "measure a cost-model description of --model on this machine (per-layer backward, forward, optimizer, "
                 "copy and cast costs) into this JSON file instead of tuning; then --simulate it");
  app.add_option("--alpha-ms", a.alpha_ms, "--describe: all-reduce latency (ms) of the cluster to simulate")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--beta-ms-per-mb", a.beta_ms_per_mb, "--describe: all-reduce cost per MiB (ms) of that cluster")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--measure-comm", a.measure_comm,
               "--describe: measure alpha and beta with --nproc local ranks (--backend)");
  app.add_option("--nproc", a.nproc, "processes (ranks) started on this machine")
      ->default_val(2)
      ->check(CLI::Range(1, 256));
  app.add_option("--backend", a.backend,
                 "process group backend: gloo (CPU), CUDA's, or one of the target's (distributed_backends of its "
                 "target.json)")
      ->default_val("gloo");
  app.add_option("--target", a.target, target::TargetOptionHelp(ctx.data_dir, false))
      ->check([&ctx](const std::string& v) { return target::CheckTargetChoice(ctx.data_dir, v, false); });
  app.add_option("--output", a.output, "folder for aoe_result_gdat_*.json and gdat_settings.json")->default_val(".");
  app.add_option("--python", a.python, "Python interpreter with torch (default $PORTKIT_PYTHON, else python3)");
  app.add_option("--warmup", a.warmup, "untimed steps after each DDP rebuild")
      ->default_val(2)
      ->check(CLI::Range(1, 1000));
  app.add_option("--measure", a.measure, "timed steps per point (median)")->default_val(5)->check(CLI::Range(1, 10000));
  app.add_option("--max-trials", a.max_trials, "points measured at most (0 = until the search converges)")
      ->default_val(0)
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--allow-lossy", a.allow_lossy, "also try the fp16 and PowerSGD hooks (they change the gradients)");
  app.add_flag("--force", a.force,
               "replace OUTPUT/gdat_settings.json or the --describe file when portkit did not write it");
  app.add_flag("--exhaustive", a.exhaustive,
               "--simulate: also evaluate every point and say whether the search found the optimum");
  app.add_option("--bucket-caps", a.bucket_caps, "bucket_cap_mb values, MiB (default 1,2,5,10,25,50,100)");
  app.add_option("--first-buckets", a.first_buckets, "first bucket caps, MiB (default 0.25,1,4,16)");
  app.add_option("--bucket-views", a.bucket_views, "gradient_as_bucket_view values (default 0,1)");
  app.add_option("--static-graphs", a.static_graphs, "static_graph values (default 0,1)");
  app.add_option("--powersgd-ranks", a.powersgd_ranks, "PowerSGD ranks tried with --allow-lossy (default 1,4)");
  app.add_option("--lr", a.lr, "SGD learning rate of the training steps")->default_val(0.01);
  app.add_option("--seed", a.seed, "seed of the model and of the random batches")->default_val(0);
  app.add_option("--timeout", a.timeout, "seconds before a stuck rank is ended")
      ->default_val(600)
      ->check(CLI::PositiveNumber);
  app.footer(
      "Writes OUTPUT/aoe_result_gdat_{timestamp}_pid{pid}.json (rewritten after every trial) and\n"
      "OUTPUT/gdat_settings.json; apply it with portkit.gdat.make_ddp(model, portkit.gdat.load_settings(FILE)).\n"
      "Environment: PORTKIT_PYTHON (interpreter), PORTKIT_PYTHON_DIR (companion package folder).");
  if (auto code = Parse(app, argc, argv)) return *code;

  if (Status st = Validate(a); !st.ok()) return Fail(ctx, st);
  auto target = analyse::Target::Load(ctx.data_dir, a.target, "", nullptr);
  if (!target.ok()) return Fail(ctx, target.status());
  auto device = DeviceOfBackend(*target, a.backend);
  if (!device.ok()) return Fail(ctx, device.status());
  if (!a.simulate.empty())
    if (Status st = CheckInput(a.simulate, "--simulate", PathKind::kFile); !st.ok()) return Fail(ctx, st);
  if (!a.describe.empty()) {
    if (Status st = CheckOutputFile(a.describe, "--describe"); !st.ok()) return Fail(ctx, st);
  } else if (Status st = CheckOutputFolder(a.output, "--output"); !st.ok()) {
    return Fail(ctx, st);
  }
  // The one fixed-name file each mode writes (the result file's name is new each run).
  const fs::path written = a.describe.empty() ? fs::path(a.output) / "gdat_settings.json" : fs::path(a.describe);
  if (Status st = CheckReplaceable(written, a.describe.empty() ? "--output" : "--describe", a.force); !st.ok())
    return Fail(ctx, st);
  if (a.python.empty()) {
    const char* env = std::getenv("PORTKIT_PYTHON");
    a.python = env && *env ? env : "python3";
  }

  std::vector<std::string> cmd = {a.python, "-m", "portkit.gdat"};
  if (!a.describe.empty()) {
    cmd.insert(cmd.end(), {"describe", "--model", a.model, "--output", a.describe, "--nproc", std::to_string(a.nproc),
                           "--backend", a.backend, "--seed", std::to_string(a.seed)});
    for (const auto& in : a.inputs) cmd.insert(cmd.end(), {"--input", in});
    if (a.alpha_ms >= 0)
      cmd.insert(cmd.end(), {"--alpha-ms", Number(a.alpha_ms), "--beta-ms-per-mb", Number(a.beta_ms_per_mb)});
    if (a.measure_comm) cmd.push_back("--measure-comm");
    if (!device->import.empty()) cmd.insert(cmd.end(), {"--device-import", device->import});
  } else if (!a.simulate.empty()) {
    cmd.insert(cmd.end(), {"simulate", a.simulate});
    if (a.exhaustive) cmd.push_back("--exhaustive");
  } else {
    cmd.insert(cmd.end(), {"train", "--model", a.model, "--nproc", std::to_string(a.nproc), "--backend", a.backend,
                           "--warmup", std::to_string(a.warmup), "--measure", std::to_string(a.measure), "--lr",
                           Number(a.lr), "--seed", std::to_string(a.seed), "--timeout", Number(a.timeout)});
    for (const auto& in : a.inputs) cmd.insert(cmd.end(), {"--input", in});
    if (!device->device_type.empty()) cmd.insert(cmd.end(), {"--device-type", device->device_type});
    if (!device->import.empty()) cmd.insert(cmd.end(), {"--device-import", device->import});
  }
  if (a.describe.empty()) {
    cmd.insert(cmd.end(), {"--output", a.output});
    if (a.allow_lossy) cmd.push_back("--allow-lossy");
    if (a.max_trials > 0) cmd.insert(cmd.end(), {"--max-trials", std::to_string(a.max_trials)});
    for (const auto& [flag, value] : {std::pair<const char*, const std::string&>{"--bucket-caps", a.bucket_caps},
                                      {"--first-buckets", a.first_buckets},
                                      {"--bucket-views", a.bucket_views},
                                      {"--static-graphs", a.static_graphs},
                                      {"--powersgd-ranks", a.powersgd_ranks}})
      if (!value.empty()) cmd.insert(cmd.end(), {flag, value});
  }

  SpawnOptions spawn;
  spawn.argv = cmd;
  // The companion package's folder first on PYTHONPATH (as `prof collect` does); none found: the
  // interpreter's own (pip-installed) portkit.
  if (std::string env = CompanionPythonPathEnv(); !env.empty()) spawn.env_set.push_back(env);
  spawn.stdout_mode = ChildOutput::kInherit;
  spawn.stderr_mode = ChildOutput::kInherit;
  auto result = Spawn(spawn);
  if (!result.ok())
    return Fail(ctx,
                Status(ErrorCode::kInternal, "cannot start " + a.python + " for GDAT: " + result.status().message() +
                                                 " (give an interpreter with torch: --python or PORTKIT_PYTHON)"));
  if (result->ok()) {
    if (Status st = RecordWrittenFile(written); !st.ok()) return Fail(ctx, st);
    return kExitOk;
  }
  if (result->end == ProcessResult::End::kExited && result->exit_code == kExitUsage) return kExitUsage;
  ctx.logger.Error("GDAT (" + a.python + " -m portkit.gdat) " + result->Describe());
  return kExitFailure;
}

}  // namespace portkit::cli
