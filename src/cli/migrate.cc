#include "cli/migrate.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "analyse/api.h"
#include "cli/cli_common.h"
#include "core/input_files.h"
#include "render/migrate_report.h"
#include "target/target_facts.h"

namespace portkit::cli {

int MigrateCommand(int argc, char** argv, Context& ctx) {
  analyse::MigrateOptions opt;
  std::string input, output;
  std::vector<std::string> formats;
  CLI::App app{
      "Migrated copy of a PyTorch project for the target: <output>/<basename(input)>_msft/, and beside "
      "it <output>/<basename(input)>_msft_report/ with migration.patch, the change list (change_list.csv, "
      "change_list.json) and migration_log.txt.",
      "portkit migrate"};
  app.add_option("-i,--input", input, "folder of the project to migrate")->required();
  app.add_option("-o,--output", output, "folder for the migrated copy (created if missing)")->required();
  app.add_option("--target", opt.target, target::TargetOptionHelp(ctx.data_dir, true))
      ->check([&ctx](const std::string& v) { return target::CheckTargetChoice(ctx.data_dir, v, true); });
  app.add_flag("--force", opt.force,
               "write into an existing <output>/<name>_msft or <name>_msft_report folder that portkit migrate did "
               "not create");
  app.add_option("-v,--version", opt.version,
                 "torch version of the code (as for analyse; default: newest list): APIs its support list "
                 "marks unsupported are left unchanged with a warning");
  auto* unsafe = app.add_flag("--unsafe", opt.unsafe,
                              "also apply affinity replacements (fused optimizers, masked index_put) that can "
                              "change numerics");
  auto* transfer = app.add_flag("--transfer-only,--transfer-to-npu", opt.transfer_only,
                                "change nothing but add the target's run-time transfer import (transfer_import "
                                "of its target.json) after the torch imports of the entry scripts (files with `if "
                                "__name__ == \"__main__\":`, or those given with --entry)");
  transfer->excludes(unsafe);
  app.add_option("--entry", opt.entries,
                 "with --transfer-only: an entry script, relative to the input folder (repeatable); "
                 "replaces the `__main__` detection")
      ->needs(transfer);
  size_t max_mb = analyse::kDefaultMaxPythonFileBytes >> 20;
  app.add_option("--max-file-mb", max_mb,
                 "Python files larger than this are copied unchanged, not migrated (default " + std::to_string(max_mb) +
                     "; a file's parse tree takes 60-75 times its size)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_flag("--dry-run", opt.dry_run,
               "write nothing: print, per edit class, how many edits the migration would make in how many files, "
               "and the edits it would list for review");
  std::string import_policy = "entry";
  app.add_option("--import-policy", import_policy,
                 "where the target's import line (import torch_npu) goes: entry (default: the entry scripts and "
                 "files that name the module; a module an entry script imports gets none) or every-file (each "
                 "changed file)")
      ->check(CLI::IsMember({"entry", "every-file"}));
  AddJobsOption(app, &ctx.jobs);
  AddFormatOption(app, &formats, {"csv", "json"}, {"csv"});
  if (auto code = Parse(app, argc, argv)) return *code;
  opt.input = input;
  opt.output = output;
  opt.max_file_bytes = max_mb << 20;
  opt.import_policy = import_policy == "every-file" ? analyse::MigrateOptions::ImportPolicy::kEveryFile
                                                    : analyse::MigrateOptions::ImportPolicy::kEntry;

  // Everything is checked before any work or any file is created (--target while parsing).
  if (Status st = CheckInput(opt.input, "input", PathKind::kDirectory); !st.ok()) return Fail(ctx, st);
  if (Status st = CheckOutputFolder(opt.output, "output"); !st.ok()) return Fail(ctx, st);

  auto report = analyse::RunMigrate(opt, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  if (opt.dry_run) {
    std::string table = render::MigrateDryRunTable(*report);
    std::fwrite(table.data(), 1, table.size(), stdout);
    std::fflush(stdout);
    return kExitOk;
  }
  auto table = render::WriteMigrateReports(*report, formats, ctx.logger);
  if (!table.ok()) return Fail(ctx, table.status());
  std::vector<std::string> reports = {"migration.patch", "migration_log.txt"};
  for (const auto& f : formats) reports.push_back("change_list." + f);
  std::sort(reports.begin(), reports.end());
  if (Status st = MarkOutput(report->reports_dir, "migrate", reports); !st.ok()) return Fail(ctx, st);
  std::fwrite(table->data(), 1, table->size(), stdout);
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace portkit::cli
