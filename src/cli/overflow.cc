// `portkit overflow DUMP`: argv → OverflowOptions → RunOverflow → table or JSON.
#include <cstdio>

#include "accuracy/api.h"
#include "accuracy/dump.h"
#include "cli/accuracy_commands.h"
#include "cli/cli_common.h"
#include "core/atomic_file.h"
#include "core/input_files.h"
#include "core/output_policy.h"
#include "render/dump_tools_render.h"

namespace portkit::cli {

namespace {

/// The overwrite policy for `-o FILE` (docs/safety.md, Outputs; core/output_policy.h): a file of
/// the dump itself is never replaced; any other existing file only when portkit's ledger in its
/// folder lists it (an earlier overflow -o wrote it) or with --force.
Status CheckReplaceableOutput(const std::string& output, const std::string& dump, bool force) {
  if (output.empty()) return Status::Ok();
  const std::filesystem::path out(output);
  if (DescribeFileType(out) == "missing") return Status::Ok();
  std::error_code ec;
  for (const char* name : {"manifest.jsonl", "dump.json", accuracy::kDumpEndMarker})
    if (std::filesystem::equivalent(out, std::filesystem::path(dump) / name, ec))
      return InvalidArgument("-o " + output + " is the dump's own " + name + "; it is never replaced: give another -o");
  return CheckReplaceable(out, "-o", force);
}

}  // namespace

int OverflowCommand(int argc, char** argv, Context& ctx) {
  std::string dir, format = "text", output;
  bool fail_on_overflow = false, force = false;
  CLI::App app{
      "List the operators whose outputs overflow (inf/nan, or beyond fp16's range in fp16) in a dump, "
      "in execution order, the first one marked, and name the origin: the first operator whose output "
      "holds inf/nan while its floating inputs are finite (fill and creation operators such as full, "
      "masked_fill or empty left out). Exit status: 0 done, 1 with --fail-on-overflow when an "
      "operator other than a fill or creation operator overflows, 2 bad usage or input or output.",
      "portkit overflow"};
  app.add_option("dump", dir, "a dump folder written by portkit.torch.dumper")->required();
  app.add_option("--format", format, "text (a table) or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("-o,--output", output,
                 "write the table or JSON to this file (atomically) instead of stdout; an existing file is replaced "
                 "only when portkit wrote it (listed in its folder's .portkit-files) or with --force");
  app.add_flag("--force", force, "replace an existing -o file");
  app.add_flag("--fail-on-overflow", fail_on_overflow,
               "exit 1 when an operator overflows (fill and creation operators, e.g. a -inf attention mask, left out)");
  if (auto rc = Parse(app, argc, argv)) return *rc;
  for (Status st :
       {CheckInput(dir, "dump", PathKind::kDirectory), output.empty() ? Status::Ok() : CheckOutputFile(output, "-o")})
    if (!st.ok()) return Fail(ctx, st);
  if (Status st = CheckReplaceableOutput(output, dir, force); !st.ok()) return Fail(ctx, st);

  auto report = accuracy::RunOverflow({dir}, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  for (const auto& w : report->warnings) ctx.logger.Warning(w);
  std::string text = format == "json" ? render::OverflowJson(*report) : render::OverflowText(*report);
  if (!output.empty()) {
    if (Status st = WriteFileAtomic(output, text); !st.ok()) return Fail(ctx, st);
    // Listed as portkit's, so the next overflow -o may replace it without --force.
    if (Status st = RecordWrittenFile(output); !st.ok()) ctx.logger.Warning(st.message());
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  if (report->overflowing.empty()) {
    ctx.logger.Info("No overflowing operator in " + dir + " (" + std::to_string(report->operators) + " operators).");
    return kExitOk;
  }
  const auto& first = report->overflowing.front();
  ctx.logger.Info(std::to_string(report->overflowing.size()) + " overflowing operators; the first is " + first.name +
                  " #" + std::to_string(first.index) + " (" + first.reason + ").");
  if (report->origin)
    ctx.logger.Info("The first inf/nan arises in " + report->origin->name + " #" +
                    std::to_string(report->origin->index) + " (" + report->origin->phase +
                    "): " + report->origin->reason + ".");
  return fail_on_overflow && report->HasComputedOverflow() ? kExitFindings : kExitOk;
}

}  // namespace portkit::cli
