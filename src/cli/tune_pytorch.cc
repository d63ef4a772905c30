#include "cli/tune_pytorch.h"

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "core/output_policy.h"
#include "tune/api.h"

namespace portkit::cli {
namespace {

void AddSgatOptions(CLI::App& app, tune::SgatOptions& o, std::string& framework, std::string& output, std::string& bank,
                    bool& force) {
  app.add_option("--framework", framework, "pytorch")->required()->check(CLI::IsMember({"pytorch"}));
  app.add_option("--model", o.model, "Python factory pkg.module:make_model returning an nn.Module")->required();
  app.add_option("--input", o.inputs,
                 "example inputs, comma list of [DTYPE:]D0xD1x...[:LOW..HIGH] (float32 default; values uniform in "
                 "[LOW, HIGH), e.g. int64:8x16:0..50; repeatable)")
      ->required();
  app.add_option("--job-type", o.job_type,
                 "1 = subgraph tuning (SGAT); 2 = OPAT kernels for the model's Linear layers (portkit tune "
                 "--job-type=2 into the same bank), routed where they beat torch's op, then SGAT with them as a "
                 "candidate; also --job_type")
      ->default_val(1);
  app.add_option("--max-evals", o.max_evals, "job type 2: candidates per kernel (default: portkit tune's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--output", output, "folder for optimized.pt, optimized.json and the result file")->required();
  app.add_option("--bank,--tune-bank", bank, "knowledge-base folder (default $TUNE_BANK_PATH, else ~/.cache/portkit)");
  app.add_flag("--lookup-only", o.lookup_only, "use the bank's entries, tune nothing (misses stay eager)");
  app.add_flag("--repeat-tune", o.repeat_tune,
               "re-tune bank hits; replace only when beaten beyond noise (REPEAT_TUNE)");
  app.add_flag("--no-compile", o.no_compile, "do not try torch.compile (tried by default on torch 2.x)");
  app.add_option("--rounds", o.rounds, "interleaved timing rounds per comparison")
      ->default_val(15)
      ->check(CLI::Range(3, 10000));
  app.add_option("--threads", o.threads,
                 "pin the intra-op thread count (default: tuned among 1, torch's default, the cores)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--time-budget", o.time_budget,
                 "seconds the tuning may take (default 120: a ResNet-50-size model within 3 minutes on two cores; "
                 "0: no bound); subgraphs left when it is spent stay eager, losing candidates stop early")
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--precision", o.precision,
                 "fp32 (default): no lower-precision candidate; bf16 or int8-dynamic: whole-model candidates in "
                 "that precision too, each kept only within the accuracy limits on your inputs (docs/tune.md)")
      ->check(CLI::IsMember({"fp32", "bf16", "int8-dynamic"}));
  app.add_option("--max-rel-err", o.max_rel_err,
                 "with --precision bf16|int8-dynamic: largest max|out - fp32| / max|fp32| accepted "
                 "(default 0.02 for bf16, 0.05 for int8-dynamic)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--min-cosine", o.min_cosine,
                 "with --precision bf16|int8-dynamic: smallest cosine similarity to fp32 accepted "
                 "(default 0.999 for bf16, 0.99 for int8-dynamic)")
      ->check(CLI::Range(-1.0, 1.0));
  app.add_option("--python", o.python, "Python interpreter with torch (default $PORTKIT_PYTHON, else python3)");
  app.add_flag("--force", force,
               "replace optimized.pt / optimized.json / optimized_module.pt in --output that portkit did not write");
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
  tune::SgatOptions opt;
  std::string framework, output, bank;
  bool force = false;
  AddSgatOptions(app, opt, framework, output, bank, force);
  if (auto code = Parse(app, argc, argv)) return *code;
  opt.output = output;
  opt.bank = bank;
  opt.program_name = argv[0];

  if (Status st = tune::ValidateSgatOptions(opt); !st.ok()) return Fail(ctx, st);
  if (Status st = CheckOutputFolder(output, "--output"); !st.ok()) return Fail(ctx, st);
  // The artifact's fixed names (docs/safety.md, Outputs); its result file's name is new each run.
  if (Status st = CheckReplaceableIn(output, tune::SgatArtifactNames(), "--output", force); !st.ok())
    return Fail(ctx, st);
  if (!bank.empty())
    if (Status st = CheckOutputFolder(bank, "--bank"); !st.ok()) return Fail(ctx, st);

  auto report = tune::RunSgat(opt, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  switch (report->companion.end) {
    case tune::CompanionEnd::kOk:
      if (Status st = RecordWritten(output, report->artifact_files); !st.ok()) return Fail(ctx, st);
      ctx.logger.Info("Aoe process finished");
      return kExitOk;
    case tune::CompanionEnd::kRefused: return kExitUsage;  // the companion said why
    case tune::CompanionEnd::kFailed: break;
  }
  ctx.logger.Error(report->companion.failure);
  return kExitFailure;
}

}  // namespace portkit::cli
