// GDAT, gradient (DDP communication) tuning: the options checked here and the backend's device
// found in the target data; the tuning done by the Python companion (python/portkit/gdat), run as
// `python -m portkit.gdat describe | simulate | train`, since its online mode must run inside the
// training processes.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analyse/target.h"
#include "tune/api.h"
#include "tune/companion.h"

namespace portkit::tune {
namespace fs = std::filesystem;
namespace {

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

/// Which options go together, and the model factory.
Status CheckCombination(const GdatOptions& a) {
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
  return Status::Ok();
}

/// The counts and times the command line bounds when it parses them.
Status CheckNumbers(const GdatOptions& a) {
  if (a.nproc < 1 || a.nproc > 256) return InvalidArgument("--nproc " + std::to_string(a.nproc) + ": give 1 to 256");
  if (a.warmup < 1 || a.warmup > 1000)
    return InvalidArgument("--warmup " + std::to_string(a.warmup) + ": give 1 to 1000");
  if (a.measure < 1 || a.measure > 10000)
    return InvalidArgument("--measure " + std::to_string(a.measure) + ": give 1 to 10000");
  if (a.max_trials < 0)
    return InvalidArgument("--max-trials " + std::to_string(a.max_trials) + ": give 0 (until converged) or more");
  if (!(a.timeout > 0)) return InvalidArgument("--timeout: give a positive number of seconds");
  return Status::Ok();
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

/// The options checked, and the backend's device.
Expected<BackendDevice> CheckAndResolve(const GdatOptions& o, const DataDirs& data) {
  PORTKIT_RETURN_IF_ERROR(CheckCombination(o));
  PORTKIT_RETURN_IF_ERROR(CheckNumbers(o));
  auto target = analyse::Target::Load(data, o.target, "", nullptr);
  if (!target.ok()) return target.status();
  return DeviceOfBackend(*target, o.backend);
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

void AddInputs(const GdatOptions& a, std::vector<std::string>& cmd) {
  for (const auto& in : a.inputs) cmd.insert(cmd.end(), {"--input", in});
}

/// `describe`: measure the cost-model description of the model.
void DescribeArgs(const GdatOptions& a, const BackendDevice& device, std::vector<std::string>& cmd) {
  cmd.insert(cmd.end(), {"describe", "--model", a.model, "--output", a.describe.string(), "--nproc",
                         std::to_string(a.nproc), "--backend", a.backend, "--seed", std::to_string(a.seed)});
  AddInputs(a, cmd);
  if (a.alpha_ms >= 0)
    cmd.insert(cmd.end(), {"--alpha-ms", Number(a.alpha_ms), "--beta-ms-per-mb", Number(a.beta_ms_per_mb)});
  if (a.measure_comm) cmd.push_back("--measure-comm");
  if (!device.import.empty()) cmd.insert(cmd.end(), {"--device-import", device.import});
}

/// `train`: tune real DDP training.
void TrainArgs(const GdatOptions& a, const BackendDevice& device, std::vector<std::string>& cmd) {
  cmd.insert(cmd.end(), {"train", "--model", a.model, "--nproc", std::to_string(a.nproc), "--backend", a.backend,
                         "--warmup", std::to_string(a.warmup), "--measure", std::to_string(a.measure), "--lr",
                         Number(a.lr), "--seed", std::to_string(a.seed), "--timeout", Number(a.timeout)});
  AddInputs(a, cmd);
  if (!device.device_type.empty()) cmd.insert(cmd.end(), {"--device-type", device.device_type});
  if (!device.import.empty()) cmd.insert(cmd.end(), {"--device-import", device.import});
}

/// What `simulate` and `train` share: the output, the lossy hooks and the search space.
void SearchArgs(const GdatOptions& a, std::vector<std::string>& cmd) {
  cmd.insert(cmd.end(), {"--output", a.output.string()});
  if (a.allow_lossy) cmd.push_back("--allow-lossy");
  if (a.max_trials > 0) cmd.insert(cmd.end(), {"--max-trials", std::to_string(a.max_trials)});
  for (const auto& [flag, value] : {std::pair<const char*, const std::string&>{"--bucket-caps", a.bucket_caps},
                                    {"--first-buckets", a.first_buckets},
                                    {"--bucket-views", a.bucket_views},
                                    {"--static-graphs", a.static_graphs},
                                    {"--powersgd-ranks", a.powersgd_ranks}})
    if (!value.empty()) cmd.insert(cmd.end(), {flag, value});
}

std::vector<std::string> GdatArgv(const GdatOptions& a, const BackendDevice& device, const std::string& python) {
  std::vector<std::string> cmd = {python, "-m", "portkit.gdat"};
  if (!a.describe.empty()) {
    DescribeArgs(a, device, cmd);
    return cmd;
  }
  if (!a.simulate.empty()) {
    cmd.insert(cmd.end(), {"simulate", a.simulate.string()});
    if (a.exhaustive) cmd.push_back("--exhaustive");
  } else {
    TrainArgs(a, device, cmd);
  }
  SearchArgs(a, cmd);
  return cmd;
}

}  // namespace

fs::path GdatWrittenFile(const GdatOptions& o) {
  return o.describe.empty() ? o.output / "gdat_settings.json" : o.describe;
}

Status ValidateGdatOptions(const GdatOptions& o, const DataDirs& data) { return CheckAndResolve(o, data).status(); }

Expected<GdatReport> RunGdat(const GdatOptions& o, Context& ctx) {
  auto device = CheckAndResolve(o, ctx.data_dir);
  if (!device.ok()) return device.status();
  const std::string python = CompanionInterpreter(o.python);
  auto run = RunCompanion(GdatArgv(o, *device, python), "GDAT (" + python + " -m portkit.gdat)");
  if (!run.ok())
    return Status(ErrorCode::kInternal, "cannot start " + python + " for GDAT: " + run.status().message() +
                                            " (give an interpreter with torch: --python or PORTKIT_PYTHON)");
  GdatReport report;
  report.companion = std::move(*run);
  report.written = GdatWrittenFile(o);
  return report;
}

}  // namespace portkit::tune
