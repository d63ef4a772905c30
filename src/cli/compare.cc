// `portkit compare REF TARGET -o DIR`: argv → CompareOptions → RunCompare → reports.
#include <cstdio>
#include <filesystem>

#include "accuracy/api.h"
#include "cli/accuracy_commands.h"
#include "cli/cli_common.h"
#include "cli/compare_ranks.h"
#include "core/output_policy.h"
#include "prof/cluster/cluster.h"
#include "render/compare_render.h"

namespace portkit::cli {
namespace fs = std::filesystem;

namespace {

/// Compares one pair of dumps into `out_dir` (options.reference / options.target): the reports,
/// the log lines, and what the console and a rank summary need.
RankOutcome ComparePair(accuracy::CompareOptions options, const fs::path& out_dir, const render::CompareFiles& files,
                        bool fail_on_divergence, Context& ctx) {
  RankOutcome outcome;
  // The rows wait for the reports in an unnamed temporary file in -o (or the nearest folder above it
  // that exists: nothing is created before the reports), not in memory.
  {
    std::error_code ec;
    fs::path dir = fs::absolute(out_dir, ec);
    while (!ec && dir.parent_path() != dir && !fs::is_directory(dir, ec)) dir = dir.parent_path(), ec.clear();
    if (fs::is_directory(dir, ec)) options.spill_dir = dir;
  }
  auto report = accuracy::RunCompare(options, ctx);
  if (!report.ok()) {
    outcome.code = Fail(ctx, report.status());
    return outcome;
  }
  for (const auto& w : report->warnings) ctx.logger.Warning(w);

  if (Status st = render::WriteCompareFiles(*report, out_dir, files); !st.ok()) {
    outcome.code = Fail(ctx, st);
    return outcome;
  }
  for (const auto& line : render::CompareConclusion(*report)) ctx.logger.Info(line);
  outcome.table = render::CompareConsoleSummary(*report);
  outcome.first_divergence = render::CompareDivergenceText(*report);
  for (const auto& [verdict, n] : report->verdict_counts) outcome.verdicts[verdict] = n;
  // Tensor data that could not be read is corrupt input: the reports say which rows.
  if (!report->read_errors.empty()) {
    const std::string& message = report->read_errors.front().second;
    outcome.code =
        Fail(ctx, ParseError(std::to_string(report->read_errors.size()) + " tensor pairs could not be read (" +
                             report->first_read_error_name + ": " + message + "); the reports list them"));
  } else if (fail_on_divergence && report->HasMismatch()) {
    ctx.logger.Error("--fail-on-divergence: " + std::to_string(report->verdict_counts.at("No")) + " tensors judged No");
    outcome.code = kExitFindings;
  }
  return outcome;
}

}  // namespace

int CompareCommand(int argc, char** argv, Context& ctx) {
  std::string ref_dir, target_dir, out_dir, mapping, match = "name+shape";
  std::vector<std::string> formats;
  int jobs = 0;
  bool fail_on_divergence = false, force = false;
  CLI::App app{
      "Compare an operator-level dump of a target run against a reference run (dumps written by "
      "portkit.torch.dumper). Exit status: 0 done, 1 with --fail-on-divergence when a tensor is judged "
      "No, 2 bad usage or input or output (also tensor data that cannot be read; the reports are still "
      "written).",
      "portkit compare"};
  app.add_option("reference", ref_dir,
                 "the reference dump (e.g. fp32 on CPU/GPU), or a folder of one dump per rank (rank0/, rank1/, ...: "
                 "each rank is compared into -o/<rank>/; under mpirun -np N the ranks are split over the processes)")
      ->required();
  app.add_option("target", target_dir, "the target dump (e.g. bf16 on the accelerator), or a folder of rank dumps")
      ->required();
  app.add_option("-o,--output", out_dir, "folder for compare_result.csv / .json / compare_report.html")->required();
  app.add_option("--mapping", mapping,
                 "CSV of renamed operators, `target_op,reference_op` a line (target names are mapped before matching)");
  app.add_option("--match", match, "operator matching key: name (name and phase) or name+shape (also output shapes)")
      ->check(CLI::IsMember({"name", "name+shape"}))
      ->capture_default_str();
  AddJobsOption(app, &jobs);
  AddFormatOption(app, &formats, {"csv", "json", "html", "msprobe"}, {"csv", "json", "html"});
  app.add_flag("--fail-on-divergence", fail_on_divergence,
               "exit 1 when any tensor is judged No (after the reports are written)");
  app.add_flag("--force", force,
               "replace report files in -o that an earlier compare did not write (by default only the files "
               "listed in -o's .compare.complete are replaced)");
  uint64_t max_view_elements = accuracy::CompareOptions{}.max_view_elements;
  uint64_t max_call_mb = accuracy::CompareOptions{}.max_call_bytes >> 20;
  app.add_option("--max-view-elements", max_view_elements,
                 "elements a tensor file's view may read when it reads storage elements more than once (a stride "
                 "of 0, overlapping strides); beyond it the pair is a read error (0: no limit)")
      ->capture_default_str();
  app.add_option("--max-call-mb", max_call_mb,
                 "MiB of JSON one call of an msprobe dump.json may take; a larger one stops the run (0: no limit)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 20))
      ->capture_default_str();
  if (auto rc = Parse(app, argc, argv)) return *rc;
  // Under mpirun every process checks the same things; process 0 alone says what is wrong.
  auto exchange = prof::cluster::MakeExchange();
  auto fail = [&](const Status& st) { return exchange->process() == 0 ? Fail(ctx, st) : ExitCodeFor(st); };

  // Every option checked before any work, and nothing created until the reports are written.
  for (Status st : {CheckInput(ref_dir, "reference dump", PathKind::kDirectory),
                    CheckInput(target_dir, "target dump", PathKind::kDirectory),
                    mapping.empty() ? Status::Ok() : CheckInput(mapping, "--mapping", PathKind::kFile),
                    CheckOutputFolder(out_dir, "-o")})
    if (!st.ok()) return fail(st);
  render::CompareFiles files{Wants(formats, "csv"), Wants(formats, "json"), Wants(formats, "html"),
                             Wants(formats, "msprobe")};
  // Dumps of many ranks (a folder per rank on each side): each rank's reports go to -o/<rank>/.
  auto ranks = FindRankDumps(ref_dir, target_dir);
  if (!ranks.ok()) return fail(ranks.status());
  if (ranks->empty()) {
    if (Status st = render::CheckCompareOutputs(out_dir, files, force); !st.ok()) return fail(st);
  } else {
    for (const auto& rank : *ranks)
      if (Status st = render::CheckCompareOutputs(fs::path(out_dir) / rank.name, files, force); !st.ok())
        return fail(st);
    if (Status st = CheckReplaceableIn(out_dir, {kRankSummaryFile}, "-o", force); !st.ok()) return fail(st);
  }

  accuracy::CompareOptions options;
  options.reference = ref_dir;
  options.target = target_dir;
  options.mapping = mapping;
  options.match = match == "name" ? accuracy::MatchKey::kName : accuracy::MatchKey::kNameAndShape;
  options.jobs = jobs;
  options.msprobe_names = Wants(formats, "msprobe");
  options.max_view_elements = max_view_elements;
  options.max_call_bytes = max_call_mb << 20;
  if (!ranks->empty()) {
    return CompareRanks(
        *ranks, out_dir, *exchange,
        [&](const RankDumps& rank, const fs::path& out, Context& rank_ctx) {
          accuracy::CompareOptions one = options;
          one.reference = rank.reference, one.target = rank.target;
          return ComparePair(one, out, files, fail_on_divergence, rank_ctx);
        },
        ctx);
  }
  // Under mpirun with a single pair of dumps, process 0 does the work and the others wait for its
  // exit code.
  int code = kExitOk;
  if (exchange->process() == 0) {
    RankOutcome outcome = ComparePair(options, out_dir, files, fail_on_divergence, ctx);
    std::fwrite(outcome.table.data(), 1, outcome.table.size(), stdout);
    code = outcome.code;
  }
  return exchange->processes() > 1 ? exchange->Broadcast(code) : code;
}

}  // namespace portkit::cli
