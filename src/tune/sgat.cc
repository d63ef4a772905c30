// SGAT for a PyTorch model: the options checked here, the tuning done by the Python companion
// (python/portkit/tune), run as `python -m portkit.tune`.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tune/api.h"
#include "tune/companion.h"

namespace portkit::tune {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kDtypes[] = {"float32", "float64", "float16", "bfloat16", "int64",
                                        "int32",   "int16",   "int8",    "uint8",    "bool"};

/// "LOW..HIGH" after the dimensions: two numbers (integers for an integer dtype) with LOW < HIGH.
Status CheckValueRange(const std::string& part, const std::string& dtype, const std::string& range) {
  const bool floating = dtype == "float32" || dtype == "float64" || dtype == "float16" || dtype == "bfloat16";
  if (dtype == "bool") return InvalidArgument("--input '" + part + "': a bool input takes no value range");
  size_t dots = range.find("..");
  auto number = [&](const std::string& text, double* value) {
    if (text.empty() || text.size() > 30) return false;
    const char* allowed = floating ? "+-0123456789.eE" : "+-0123456789";
    if (text.find_first_not_of(allowed) != std::string::npos) return false;
    char* end = nullptr;
    *value = std::strtod(text.c_str(), &end);
    return end == text.c_str() + text.size();
  };
  double low = 0, high = 0;
  if (dots == std::string::npos || !number(range.substr(0, dots), &low) || !number(range.substr(dots + 2), &high))
    return InvalidArgument("--input '" + part + "': expected a value range LOW..HIGH (" +
                           (floating ? "numbers" : "integers") + ") after the dimensions, like " +
                           (floating ? "-1.5..1.5" : "0..50"));
  if (!(low < high))
    return InvalidArgument("--input '" + part + "': the range " + range +
                           " is empty (values are drawn from [LOW, HIGH), LOW < HIGH)");
  return Status::Ok();
}

/// "8x3x224" or "8X3": positive dimensions.
Status CheckDims(const std::string& part, const std::string& dims) {
  size_t pos = 0;
  int count = 0;
  while (true) {
    size_t x = dims.find_first_of("xX", pos);
    std::string d = dims.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    bool digits = !d.empty() && d.size() <= 9 && d.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stol(d) <= 0)
      return InvalidArgument("--input '" + part + "': expected positive dimensions like 8x3x224x224");
    ++count;
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  if (count == 0) return InvalidArgument("--input '" + part + "': no dimensions");
  return Status::Ok();
}

/// One part of --input: [DTYPE:]D0xD1x...[:LOW..HIGH].
Status CheckInputPart(const std::string& part) {
  std::string head = part, range;
  if (size_t last = part.rfind(':'); last != std::string::npos && part.find("..", last) != std::string::npos) {
    head = part.substr(0, last);
    range = part.substr(last + 1);
  }
  size_t colon = head.rfind(':');
  std::string dtype = colon == std::string::npos ? "float32" : head.substr(0, colon);
  std::string dims = colon == std::string::npos ? head : head.substr(colon + 1);
  bool known = false;
  for (auto d : kDtypes) known = known || d == dtype;
  if (!known)
    return InvalidArgument("--input '" + part + "': unknown dtype '" + dtype +
                           "' (float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8, bool)");
  PORTKIT_RETURN_IF_ERROR(CheckDims(part, dims));
  if (!range.empty()) PORTKIT_RETURN_IF_ERROR(CheckValueRange(part, dtype, range));
  return Status::Ok();
}

/// "8x3x224x224,int64:8x128:0..50": each part [DTYPE:]D0xD1x...[:LOW..HIGH] with positive dimensions.
Status CheckInputSpec(const std::string& spec) {
  if (spec.empty()) return InvalidArgument("--input: empty; give shapes like 8x3x224x224 or int64:8x128");
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    PORTKIT_RETURN_IF_ERROR(
        CheckInputPart(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Status::Ok();
}

Status CheckModelSpec(const std::string& model) {
  size_t colon = model.find(':');
  if (model.empty() || colon == std::string::npos || colon == 0 || colon + 1 == model.size() ||
      model.find_first_of("/\\ ") != std::string::npos)
    return InvalidArgument("--model '" + model +
                           "': with --framework=pytorch give a Python factory as pkg.module:make_model (a callable "
                           "returning a torch.nn.Module, importable from the current folder)");
  return Status::Ok();
}

/// The --input parts as one comma list, as the companion takes it.
std::string InputSpec(const SgatOptions& o) {
  std::string spec;
  for (const auto& i : o.inputs) spec += (spec.empty() ? "" : ",") + i;
  return spec;
}

/// The `portkit` the companion runs for job type 2: this very binary.
std::string ThisProgram(const std::string& program_name) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? program_name : self.string();
}

// A limit as the companion's argparse reads it back exactly (shortest round-trip form).
std::string FormatLimit(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::vector<std::string> SgatArgv(const SgatOptions& o, const std::string& python) {
  std::vector<std::string> argv = {python,
                                   "-m",
                                   "portkit.tune",
                                   "--model",
                                   o.model,
                                   "--input",
                                   InputSpec(o),
                                   "--output",
                                   o.output.string(),
                                   "--job-type",
                                   std::to_string(o.job_type),
                                   "--rounds",
                                   std::to_string(o.rounds)};
  if (o.job_type == 2) {
    // The companion tunes the kernels by running this very binary (portkit tune --job-type=2).
    argv.insert(argv.end(), {"--portkit", ThisProgram(o.program_name)});
    if (o.max_evals > 0) argv.insert(argv.end(), {"--max-evals", std::to_string(o.max_evals)});
  }
  if (!o.bank.empty()) argv.insert(argv.end(), {"--bank", o.bank.string()});
  if (o.lookup_only) argv.push_back("--lookup-only");
  if (o.repeat_tune) argv.push_back("--repeat-tune");
  if (o.no_compile) argv.push_back("--no-compile");
  if (o.threads > 0) argv.insert(argv.end(), {"--threads", std::to_string(o.threads)});
  if (o.time_budget >= 0) argv.insert(argv.end(), {"--time-budget", std::to_string(o.time_budget)});
  if (o.precision != "fp32") argv.insert(argv.end(), {"--precision", o.precision});
  if (o.max_rel_err >= 0) argv.insert(argv.end(), {"--max-rel-err", FormatLimit(o.max_rel_err)});
  if (o.min_cosine >= -1) argv.insert(argv.end(), {"--min-cosine", FormatLimit(o.min_cosine)});
  return argv;
}

}  // namespace

const std::vector<std::string>& SgatArtifactNames() {
  static const std::vector<std::string> kNames = {"optimized.pt", "optimized.json", "optimized_module.pt",
                                                  "optimized.onnx"};
  return kNames;
}

Status ValidateSgatOptions(const SgatOptions& o) {
  if (o.job_type != 1 && o.job_type != 2)
    return Status(ErrorCode::kUnsupported,
                  "--job-type=" + std::to_string(o.job_type) +
                      ": with --framework=pytorch 1 (SGAT) and 2 (OPAT kernels inside the model, with "
                      "SGAT) are implemented here; 4 (GDAT) has its own options (docs/tune.md)");
  PORTKIT_RETURN_IF_ERROR(CheckModelSpec(o.model));
  PORTKIT_RETURN_IF_ERROR(CheckInputSpec(InputSpec(o)));
  if (o.rounds < 3 || o.rounds > 10000)
    return InvalidArgument("--rounds " + std::to_string(o.rounds) + ": give 3 to 10000");
  if (o.threads < 0 || o.threads > 4096)
    return InvalidArgument("--threads " + std::to_string(o.threads) + ": give 1 to 4096 (0: tuned)");
  if (o.max_evals < 0)
    return InvalidArgument("--max-evals " + std::to_string(o.max_evals) +
                           ": give at least 1 (0: portkit tune's default)");
  if (o.time_budget > 1e7) return InvalidArgument("--time-budget: give 0 (no bound) to 10000000 seconds");
  if (o.precision != "fp32" && o.precision != "bf16" && o.precision != "int8-dynamic")
    return InvalidArgument("--precision " + o.precision + ": give fp32, bf16 or int8-dynamic");
  if (o.precision == "fp32" && (o.max_rel_err >= 0 || o.min_cosine >= -1))
    return InvalidArgument("--max-rel-err and --min-cosine apply to --precision bf16 or int8-dynamic only");
  if (o.min_cosine > 1) return InvalidArgument("--min-cosine: give -1 to 1");
  return Status::Ok();
}

Expected<SgatReport> RunSgat(const SgatOptions& o, Context& ctx) {
  PORTKIT_RETURN_IF_ERROR(ValidateSgatOptions(o));
  const std::string python = CompanionInterpreter(o.python);
  ctx.logger.Info("SGAT: " + python + " -m portkit.tune --model " + o.model + " --input " + InputSpec(o));
  auto run = RunCompanion(SgatArgv(o, python), "the Python companion");
  if (!run.ok())
    return InvalidArgument("cannot start the Python companion with '" + python + "': " + run.status().message() +
                           " (give --python or set PORTKIT_PYTHON)");
  SgatReport report;
  report.companion = std::move(*run);
  if (report.companion.end == CompanionEnd::kOk) {
    std::error_code ec;
    for (const auto& name : SgatArtifactNames())
      if (fs::exists(o.output / name, ec)) report.artifact_files.push_back(name);
  }
  return report;
}

}  // namespace portkit::tune
