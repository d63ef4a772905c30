#include "cli/tune_pytorch.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "core/output_policy.h"
#include "core/subprocess.h"

namespace portkit::cli {
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

/// "8x3x224x224,int64:8x128:0..50": each part [DTYPE:]D0xD1x...[:LOW..HIGH] with positive dimensions.
Status CheckInputSpec(const std::string& spec) {
  if (spec.empty()) return InvalidArgument("--input: empty; give shapes like 8x3x224x224 or int64:8x128");
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string part = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
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
    if (!range.empty())
      if (Status st = CheckValueRange(part, dtype, range); !st.ok()) return st;
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

}  // namespace

bool WantsPytorchFramework(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--framework=pytorch") return true;
    if (a == "--framework" && i + 1 < argc && std::string(argv[i + 1]) == "pytorch") return true;
  }
  return false;
}

int TunePytorchCommand(int argc, char** argv, Context& ctx) {
  CLI::App app{
      "SGAT for a PyTorch model (AOE's subgraph tuning, --job-type=1): captures the model with torch.fx, "
      "splits it into blocks, times each block's strategies (eager, frozen TorchScript, "
      "optimize_for_inference, conv-bn folding, channels_last, attention fusion, thread count; torch.compile on 2.x) "
      "interleaved, keeps the winners in the "
      "knowledge base and writes OUTPUT/optimized.pt, loadable with one call. See docs/tune.md.",
      "portkit tune --framework=pytorch"};
  std::string framework, model, output, bank, python;
  std::vector<std::string> inputs;
  int job_type = 1, rounds = 15, threads = 0, max_evals = 0;
  double time_budget = -1;
  bool lookup_only = false, repeat_tune = false, no_compile = false, force = false;
  app.add_option("--framework", framework, "pytorch")->required()->check(CLI::IsMember({"pytorch"}));
  app.add_option("--model", model, "Python factory pkg.module:make_model returning an nn.Module")->required();
  app.add_option("--input", inputs,
                 "example inputs, comma list of [DTYPE:]D0xD1x...[:LOW..HIGH] (float32 default; values uniform in "
                 "[LOW, HIGH), e.g. int64:8x16:0..50; repeatable)")
      ->required();
  app.add_option("--job-type", job_type,
                 "1 = subgraph tuning (SGAT); 2 = OPAT kernels for the model's Linear layers (portkit tune "
                 "--job-type=2 into the same bank), routed where they beat torch's op, then SGAT with them as a "
                 "candidate; also --job_type")
      ->default_val(1);
  app.add_option("--max-evals", max_evals, "job type 2: candidates per kernel (default: portkit tune's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--output", output, "folder for optimized.pt, optimized.json and the result file")->required();
  app.add_option("--bank,--tune-bank", bank, "knowledge-base folder (default $TUNE_BANK_PATH, else ~/.cache/portkit)");
  app.add_flag("--lookup-only", lookup_only, "use the bank's entries, tune nothing (misses stay eager)");
  app.add_flag("--repeat-tune", repeat_tune, "re-tune bank hits; replace only when beaten beyond noise (REPEAT_TUNE)");
  app.add_flag("--no-compile", no_compile, "do not try torch.compile (tried by default on torch 2.x)");
  app.add_option("--rounds", rounds, "interleaved timing rounds per comparison")
      ->default_val(15)
      ->check(CLI::Range(3, 10000));
  app.add_option("--threads", threads,
                 "pin the intra-op thread count (default: tuned among 1, torch's default, the cores)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--time-budget", time_budget,
                 "seconds the tuning may take (default 120: a ResNet-50-size model within 3 minutes on two cores; "
                 "0: no bound); subgraphs left when it is spent stay eager, losing candidates stop early")
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--python", python, "Python interpreter with torch (default $PORTKIT_PYTHON, else python3)");
  app.add_flag("--force", force,
               "replace optimized.pt / optimized.json / optimized_module.pt in --output that portkit did not write");
  if (auto code = Parse(app, argc, argv)) return *code;

  if (job_type != 1 && job_type != 2)
    return Fail(ctx, Status(ErrorCode::kUnsupported,
                            "--job-type=" + std::to_string(job_type) +
                                ": with --framework=pytorch 1 (SGAT) and 2 (OPAT kernels inside the model, with "
                                "SGAT) are implemented here; 4 (GDAT) has its own options (docs/tune.md)"));
  if (Status st = CheckModelSpec(model); !st.ok()) return Fail(ctx, st);
  std::string input_spec;
  for (const auto& i : inputs) input_spec += (input_spec.empty() ? "" : ",") + i;
  if (Status st = CheckInputSpec(input_spec); !st.ok()) return Fail(ctx, st);
  if (Status st = CheckOutputFolder(output, "--output"); !st.ok()) return Fail(ctx, st);
  // The artifact's fixed names (docs/safety.md, Outputs); its result file's name is new each run.
  const std::vector<std::string> artifact = {"optimized.pt", "optimized.json", "optimized_module.pt", "optimized.onnx"};
  if (Status st = CheckReplaceableIn(output, artifact, "--output", force); !st.ok()) return Fail(ctx, st);
  if (!bank.empty())
    if (Status st = CheckOutputFolder(bank, "--bank"); !st.ok()) return Fail(ctx, st);
  if (python.empty()) {
    const char* env = std::getenv("PORTKIT_PYTHON");
    python = env && *env ? env : "python3";
  }

  SpawnOptions spawn;
  spawn.argv = {python,
                "-m",
                "portkit.tune",
                "--model",
                model,
                "--input",
                input_spec,
                "--output",
                output,
                "--job-type",
                std::to_string(job_type),
                "--rounds",
                std::to_string(rounds)};
  if (job_type == 2) {
    // The companion tunes the kernels by running this very binary (portkit tune --job-type=2).
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    spawn.argv.insert(spawn.argv.end(), {"--portkit", ec ? std::string(argv[0]) : self.string()});
    if (max_evals > 0) spawn.argv.insert(spawn.argv.end(), {"--max-evals", std::to_string(max_evals)});
  }
  if (!bank.empty()) spawn.argv.insert(spawn.argv.end(), {"--bank", bank});
  if (lookup_only) spawn.argv.push_back("--lookup-only");
  if (repeat_tune) spawn.argv.push_back("--repeat-tune");
  if (no_compile) spawn.argv.push_back("--no-compile");
  if (threads > 0) spawn.argv.insert(spawn.argv.end(), {"--threads", std::to_string(threads)});
  if (time_budget >= 0) spawn.argv.insert(spawn.argv.end(), {"--time-budget", std::to_string(time_budget)});
  // The companion package's folder first on PYTHONPATH (as prof collect does); none found: the
  // interpreter's own (pip-installed) portkit.
  if (std::string env = CompanionPythonPathEnv(); !env.empty()) spawn.env_set.push_back(env);
  spawn.stdout_mode = ChildOutput::kInherit;
  spawn.stderr_mode = ChildOutput::kInherit;
  ctx.logger.Info("SGAT: " + python + " -m portkit.tune --model " + model + " --input " + input_spec);
  auto result = Spawn(spawn);
  if (!result.ok())
    return Fail(ctx, InvalidArgument("cannot start the Python companion with '" + python +
                                     "': " + result.status().message() + " (give --python or set PORTKIT_PYTHON)"));
  if (result->ok()) {
    std::vector<std::string> present;
    for (const auto& name : artifact)
      if (std::filesystem::exists(std::filesystem::path(output) / name)) present.push_back(name);
    if (Status st = RecordWritten(output, present); !st.ok()) return Fail(ctx, st);
    ctx.logger.Info("Aoe process finished");
    return kExitOk;
  }
  if (result->end == ProcessResult::End::kExited && result->exit_code == 2) return kExitUsage;
  ctx.logger.Error("the Python companion " + result->Describe());
  return kExitFailure;
}

}  // namespace portkit::cli
