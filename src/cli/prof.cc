#include "cli/prof.h"

#include <cstdio>
#include <regex>

#include "cli/cli_common.h"
#include "cli/prof_cluster.h"
#include "core/atomic_file.h"
#include "core/output_policy.h"
#include "core/table.h"
#include "prof/api.h"
#include "render/prof_advisor.h"
#include "render/prof_diff.h"
#include "render/prof_query.h"
#include "render/prof_summary.h"
#include "target/target_facts.h"

namespace portkit::cli {
namespace fs = std::filesystem;
namespace {

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

/// Writes `content` to `folder/name` (the folder created when needed).
Status WriteInto(const fs::path& folder, const std::string& name, const std::string& content) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return IoError("cannot create " + folder.string() + ": " + ec.message());
  return WriteFileAtomic(folder / name, content);
}

/// The overwrite policy (core/output_policy.h) for the files a report command writes into `folder`:
/// a folder the user named (`asked` not empty) may hold files portkit did not write, which are
/// replaced only with --force; the default folder inside the profile folder is portkit's own.
Status CheckReportFiles(const std::string& asked, const fs::path& folder, const std::vector<std::string>& names,
                        bool force) {
  return asked.empty() ? Status::Ok() : CheckReplaceableIn(folder, names, "--output", force);
}

/// The output folder: the one asked for, or `default_name` inside the profile folder of `dir`.
fs::path OutputFolder(const std::string& asked, const fs::path& dir, const char* default_name) {
  return asked.empty() ? prof::ProfileFolder(dir) / default_name : fs::path(asked);
}

std::optional<prof::Severity> SeverityNamed(const std::string& name) {
  for (auto s : {prof::Severity::kHigh, prof::Severity::kMedium, prof::Severity::kLow, prof::Severity::kInfo})
    if (name == prof::SeverityName(s)) return s;
  return std::nullopt;
}

int Import(const std::string& dir, const prof::ImportLimits& limits, Context& ctx) {
  if (Status st = CheckInput(dir, "--dir"); !st.ok()) return Fail(ctx, st);
  auto report = prof::RunImport({dir, limits}, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  for (const auto& t : report->traces)
    if (!t.status.ok()) ctx.logger.Error(t.status.message());
  ctx.logger.Info("Profile database: " + report->database.string());
  Print(render::ProfImportTable(*report));
  return ExitCodeFor(report->FirstFailure());
}

/// `--max-string-mb` of the commands that read a store (docs/safety.md, Limits).
void AddMaxStringOption(CLI::App& app, uint64_t* mb) {
  app.add_option("--max-string-mb", *mb,
                 "the longest string read from portkit.db (a name, an event's args), in MiB (default 64)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1024}));
}

int ExportSummary(const std::string& dir, const std::string& output, const std::vector<std::string>& formats,
                  bool force, int64_t max_string_bytes, Context& ctx) {
  fs::path out = OutputFolder(output, dir, "summary");
  if (Status st = CheckInput(dir, "--dir"); !st.ok()) return Fail(ctx, st);
  if (Status st = CheckOutputFolder(out, "--output"); !st.ok()) return Fail(ctx, st);
  auto report = prof::RunExportSummary({dir, max_string_bytes}, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  std::vector<std::vector<std::string>> rows;
  std::string shown = output.empty() ? "summary/" : (out / "").string();
  std::vector<std::string> names;
  for (const auto& t : report->tables)
    for (const auto& format : formats) names.push_back(t.name + "." + format);
  if (Status st = CheckReportFiles(output, out, names, force); !st.ok()) return Fail(ctx, st);
  for (const auto& t : report->tables) {
    for (const auto& format : formats) {
      std::string name = t.name + "." + format;
      Status st = WriteInto(out, name, format == "csv" ? render::ProfSummaryCsv(t) : render::ProfSummaryJson(t));
      if (!st.ok()) return Fail(ctx, st);
      rows.push_back({shown + name, std::to_string(t.rows.size())});
    }
  }
  if (Status st = RecordWritten(out, names); !st.ok()) return Fail(ctx, st);
  Print(RenderTable({"files", "rows"}, rows));
  return kExitOk;
}

int ExportTimeline(const std::string& dir, const std::string& output, bool force, int64_t max_string_bytes,
                   Context& ctx) {
  fs::path out = output.empty() ? prof::ProfileFolder(dir) / "timeline" / "timeline.json" : fs::path(output);
  if (Status st = CheckInput(dir, "--dir"); !st.ok()) return Fail(ctx, st);
  if (Status st = CheckOutputFile(out, "--output"); !st.ok()) return Fail(ctx, st);
  // Only a file portkit wrote is replaced without --force (the folder's ledger, core/output_policy.h;
  // a timeline written before the ledger is known by its first bytes): a user's trace.json or
  // train.py given as -o is not.
  if (Status st = CheckReplaceable(out, "--output", force);
      !st.ok() && !StartsWithAny(out, {prof::kTimelineHead, prof::kTimelineHeadBefore}))
    return Fail(ctx, st);
  // Streamed into the file as it is built (the timeline is about as large as the traces).
  auto report = prof::RunExportTimelineTo({dir, max_string_bytes}, out, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  if (Status st = RecordWrittenFile(out); !st.ok()) return Fail(ctx, st);
  const auto& s = report->stats;
  if (s.without_detail)
    ctx.logger.Warning(std::to_string(s.without_detail) +
                       " traces were imported by an older portkit: their events have no args and their process and "
                       "thread names, counters, instants and flows are absent; run `portkit prof import` again");
  if (s.moved)
    ctx.logger.Info(std::to_string(s.moved) + " events overlapped others on their track without nesting: moved to " +
                    std::to_string(s.sibling_tracks) +
                    " sibling tracks (\"<thread> (overlap N)\"), durations unchanged.");
  ctx.logger.Info("Wrote " + (output.empty() ? std::string("timeline/timeline.json") : out.string()) + ": " +
                  std::to_string(s.events) + " events, " + std::to_string(s.marks) +
                  " metadata/counter/instant/flow events, " + std::to_string(s.flows) + " launch flows added, " +
                  std::to_string(s.moved) + " moved to sibling tracks.");
  return kExitOk;
}

int Analyse(const std::string& dir, const std::string& output, const std::vector<std::string>& formats,
            const std::string& fail_on, const std::string& target, bool force, int64_t max_string_bytes, Context& ctx) {
  fs::path out = OutputFolder(output, dir, "analysis");
  if (Status st = CheckInput(dir, "--dir"); !st.ok()) return Fail(ctx, st);
  if (Status st = CheckOutputFolder(out, "--output"); !st.ok()) return Fail(ctx, st);
  std::vector<std::string> names;
  for (const auto& format : formats) names.push_back("advisor." + std::string(format == "text" ? "txt" : format));
  if (Status st = CheckReportFiles(output, out, names, force); !st.ok()) return Fail(ctx, st);
  prof::AnalyseOptions options;
  options.dir = dir;
  options.max_string_bytes = max_string_bytes;
  options.target = target;
  auto report = prof::RunAnalyse(options, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  std::string text = render::ProfAdvisorText(*report);
  std::vector<std::string> written;
  for (const auto& format : formats) {
    std::string name = "advisor." + std::string(format == "text" ? "txt" : format);
    std::string content = format == "text"   ? text
                          : format == "html" ? render::ProfAdvisorHtml(*report)
                                             : render::ProfAdvisorJson(*report);
    if (Status st = WriteInto(out, name, content); !st.ok()) return Fail(ctx, st);
    written.push_back(name);
  }
  if (Status st = RecordWritten(out, written); !st.ok()) return Fail(ctx, st);
  Print(text);
  std::string list;
  for (const auto& w : written) list += (list.empty() ? "" : ", ") + w;
  ctx.logger.Info("Advisor report in " + out.string() + ": " + list);
  if (!fail_on.empty()) {
    size_t n = report->CountAtLeast(*SeverityNamed(fail_on));
    if (n > 0) {
      ctx.logger.Error(std::to_string(n) + " finding(s) of severity " + fail_on + " or higher (--fail-on " + fail_on +
                       ")");
      return kExitFindings;
    }
  }
  return kExitOk;
}

int Diff(const prof::DiffOptions& options, const std::string& output, const std::vector<std::string>& formats,
         bool force, Context& ctx) {
  fs::path out = OutputFolder(output, options.compare, "diff");
  if (Status st = CheckInput(options.base.string(), "base"); !st.ok()) return Fail(ctx, st);
  if (Status st = CheckInput(options.compare.string(), "compare"); !st.ok()) return Fail(ctx, st);
  for (const auto& dir : options.more_base)
    if (Status st = CheckInput(dir.string(), "--base-run"); !st.ok()) return Fail(ctx, st);
  for (const auto& dir : options.more_compare)
    if (Status st = CheckInput(dir.string(), "--compare-run"); !st.ok()) return Fail(ctx, st);
  if (Status st = CheckOutputFolder(out, "--output"); !st.ok()) return Fail(ctx, st);
  std::vector<std::string> names;
  for (const auto& format : formats) {
    if (format == "csv") names.insert(names.end(), {"diff_operators.csv", "diff_kernels.csv"});
    else names.push_back("diff.json");
  }
  if (Status st = CheckReportFiles(output, out, names, force); !st.ok()) return Fail(ctx, st);
  auto report = prof::RunDiff(options, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  Print(render::ProfDiffText(*report));
  for (const auto& format : formats) {
    Status st;
    if (format == "csv") {
      st = WriteInto(out, "diff_operators.csv", render::ProfDiffCsv(report->operators));
      if (st.ok()) st = WriteInto(out, "diff_kernels.csv", render::ProfDiffCsv(report->kernels));
    } else {
      st = WriteInto(out, "diff.json", render::ProfDiffJson(*report));
    }
    if (!st.ok()) return Fail(ctx, st);
  }
  if (Status st = RecordWritten(out, names); !st.ok()) return Fail(ctx, st);
  switch (report->verdict) {
    case prof::Verdict::kRegressed: ctx.logger.Error("regressed: " + report->verdict_reason); return kExitRegression;
    case prof::Verdict::kInconclusive:
      ctx.logger.Error("inconclusive: " + report->verdict_reason);
      return kExitInconclusive;
    default: break;
  }
  return kExitOk;
}

int Collect(const prof::CollectOptions& options, Context& ctx) {
  if (Status st = CheckOutputFolder(options.output, "--output"); !st.ok()) return Fail(ctx, st);
  if (auto argv = prof::CollectArgv(options); !argv.ok()) return Fail(ctx, argv.status());
  auto report = prof::RunCollect(options, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  if (report->traces == 0)
    return Fail(ctx, Status(ErrorCode::kInternal,
                            "no trace was written (the program " + report->program.Describe() + "); " +
                                (fs::exists(report->prof_dir) ? "what it left is in " + report->prof_dir.string()
                                                              : "no PROF_* folder was kept")));
  ctx.logger.Info("Raw trace(s) in " + report->prof_dir.string() + "; next: portkit prof import -dir " +
                  report->prof_dir.string());
  Print(report->prof_dir.string() + "\n");
  if (!report->program.ok())
    return Fail(ctx, Status(ErrorCode::kInternal, "the profiled program " + report->program.Describe() +
                                                      "; the trace of what ran is in " + report->prof_dir.string()));
  return kExitOk;
}

/// What `prof query` was asked.
struct QueryArgs {
  std::string dir, table = "ops", format = "csv", target;
  std::string positional;  ///< the folder given as DIR rather than --dir
  prof::EventFilter filter;
  int64_t max_string_bytes = prof::kDefaultMaxStoredValueBytes;
};

/// Writes the rows of `rows` and the end of the document to stdout.
template <typename Row>
void PrintRows(const std::vector<Row>& rows, render::ProfQueryWriter& w) {
  for (const auto& r : rows) w.AddRow(render::ProfQueryCells(r));
  Print(w.Take());
}

int Query(const QueryArgs& a, Context& ctx) {
  if (Status st = CheckInput(a.dir, "--dir"); !st.ok()) return Fail(ctx, st);
  prof::QueryOptions options;
  options.dir = a.dir;
  options.max_string_bytes = a.max_string_bytes;
  options.data_dir = ctx.data_dir;
  options.target = a.target;
  auto profile = prof::OpenProfile(options);
  if (!profile.ok()) return Fail(ctx, profile.status());
  for (const auto& w : profile->warnings()) ctx.logger.Warning(w);
  render::ProfQueryWriter w(a.format == "json", render::ProfQueryColumns(a.table));
  Status st;
  if (a.table == "events") {
    // Streamed: written out in pieces of about 1 MiB.
    st = profile->ForEachEvent(a.filter, [&](const prof::EventRow& row) {
      w.AddRow(render::ProfQueryCells(row));
      if (w.size() >= (size_t{1} << 20)) Print(w.Take());
      return Status::Ok();
    });
  } else if (a.table == "ops") {
    auto rows = profile->Ops(a.filter);
    if (rows.ok()) PrintRows(*rows, w);
    st = rows.status();
  } else if (a.table == "steps") {
    auto rows = profile->Steps(a.filter);
    if (rows.ok()) PrintRows(*rows, w);
    st = rows.status();
  } else {
    auto rows = profile->Comm(a.filter);
    if (rows.ok()) PrintRows(*rows, w);
    st = rows.status();
  }
  if (!st.ok()) {
    Print(w.Take());
    return Fail(ctx, st);
  }
  Print(w.Finish());
  return kExitOk;
}

/// `prof diff`'s options.
struct DiffArgs {
  std::string base, compare, output, gate = "significant";
  std::vector<std::string> formats, more_base, more_compare;
  double fail_above = 0;
  CLI::Option* fail_above_option = nullptr;
  prof::DiffOptions opt;
};

CLI::App* AddDiffCommand(CLI::App& app, DiffArgs& a, bool* report_force, const char* force_help,
                         uint64_t* max_string_mb) {
  auto* diff = app.add_subcommand("diff",
                                  "compare two profiles: step time and per-operator / per-kernel deltas "
                                  "(into CMP_DIR/diff/); exit 3 when --fail-above is exceeded");
  diff->add_option("base", a.base, "the base profile folder (imported first if needed)")->required();
  diff->add_option("compare", a.compare, "the profile to compare with it")->required();
  // One folder per flag: `--base-run A BASE CMP` must not take BASE and CMP as more runs.
  diff->add_option("--base-run", a.more_base, "one more run of the base side (a profile folder; repeatable)")
      ->allow_extra_args(false);
  diff->add_option("--compare-run", a.more_compare, "one more run of the compared side (a profile folder; repeatable)")
      ->allow_extra_args(false);
  a.fail_above_option =
      diff->add_option("--fail-above", a.fail_above,
                       "exit 3 when the step work time grew by more than this percentage beyond noise (--gate), "
                       "5 when the gate cannot decide (too few steps, or too noisy)");
  diff->add_option("--gate", a.gate,
                   "significant (default): the step work change is above the limit and its interval above 0; "
                   "interval: even the interval's lower bound is above the limit; point: the mean step change "
                   "alone (noise trips it)")
      ->check(CLI::IsMember({"significant", "interval", "point"}));
  diff->add_option("--min-steps", a.opt.min_steps,
                   "fewer measured steps on a side make the significant and interval gates inconclusive (exit 5)")
      ->check(CLI::Range(2, 1000000));
  diff->add_option("--confidence", a.opt.confidence, "two-sided confidence of the intervals")
      ->check(CLI::Range(0.5, 0.999));
  diff->add_option("--resamples", a.opt.resamples, "bootstrap resamples (seeded: the output is reproducible)")
      ->check(CLI::Range(100, 100000));
  diff->add_option("-o,--output", a.output, "folder for the files (default: CMP_DIR/diff)");
  AddFormatOption(*diff, &a.formats, {"csv", "json"}, {"csv"});
  diff->add_flag("--force", *report_force, force_help);
  AddMaxStringOption(*diff, max_string_mb);
  return diff;
}

/// `prof query`: its options into `a` (the --max-string-mb value into *max_string_mb).
CLI::App* AddQueryCommand(CLI::App& app, QueryArgs& a, uint64_t* max_string_mb, Context& ctx) {
  auto* query = app.add_subcommand(
      "query",
      "one table of an imported profile on stdout, as CSV or JSON: events (one row per event, streamed), ops "
      "(host operators: calls, self and total time), steps, comm (communication kernels)");
  query->add_option("profile", a.positional, "the profile folder (holding portkit.db)");
  query->add_option("-d,--dir", a.dir, "the profile folder, as a flag; also -dir");
  query->add_option("--table", a.table, "events, ops, steps or comm (default: ops)")
      ->check(CLI::IsMember(render::ProfQueryTables()));
  query->add_option("--format", a.format, "csv or json (default: csv)")->check(CLI::IsMember({"csv", "json"}));
  query->add_option("--limit", a.filter.limit, "at most this many rows (default: all)");
  query
      ->add_option("--name-regex", a.filter.name_regex,
                   "only rows whose name contains a match of this ECMAScript regular expression")
      ->check([](const std::string& v) {
        try {
          std::regex check(v);
        } catch (const std::regex_error& e) {
          return "'" + v + "' is not a regular expression (" + e.what() + ")";
        }
        return std::string();
      });
  std::vector<std::string> event_kinds;
  for (int k = 0; k <= static_cast<int>(prof::EventKind::kOther); ++k)
    event_kinds.emplace_back(prof::EventKindName(static_cast<prof::EventKind>(k)));
  query
      ->add_option("--kind", a.filter.kinds,
                   "--table events: only events of these kinds (cpu_op, kernel, gpu_memcpy, runtime, step, ...)")
      ->delimiter(',')
      ->check(CLI::IsMember(event_kinds));
  query->add_option("--target", a.target, target::TargetOptionHelp(ctx.data_dir, false))
      ->check([&ctx](const std::string& v) { return target::CheckTargetChoice(ctx.data_dir, v, false); });
  AddMaxStringOption(*query, max_string_mb);
  return query;
}

}  // namespace

int ProfCommand(int argc, char** argv, Context& ctx) {
  CLI::App app{
      "Profiles of PyTorch programs: collect a trace, import traces into a SQLite store, export "
      "summaries and a timeline, run the advisor, compare two profiles.",
      "portkit prof"};
  app.require_subcommand(1);

  prof::CollectOptions collect_opt;
  std::string collect_output;
  auto* collect =
      app.add_subcommand("collect",
                         "run a Python program under the PyTorch profiler (no code changes) and write the raw "
                         "trace into DIR/PROF_<timestamp>/");
  collect->add_option("--output", collect_output, "folder for the PROF_<timestamp> folder")->required();
  collect
      ->add_option("--steps", collect_opt.steps,
                   "record this many steps (optimizer.step() calls) after a warm-up step; default: whole run")
      ->check(CLI::NonNegativeNumber);
  collect->add_flag("--record-shapes", collect_opt.record_shapes, "record operator input shapes");
  collect->add_flag("--with-stack", collect_opt.with_stack, "record Python stacks");
  collect->add_option("--application", collect_opt.application,
                      "the command as one string (instead of giving it after --)");
  collect->add_option("command", collect_opt.command, "the command, after --");

  std::string import_dir;
  auto* import = app.add_subcommand(
      "import",
      "import traces into <dir>/portkit.db: Kineto JSON(.gz), legacy torch profiler JSON, Ascend PyTorch profiler "
      "trace_view.json and kernel_details.csv, recognised by their content");
  import
      ->add_option("-d,--dir", import_dir,
                   "a PROF_<timestamp> folder, any folder of traces (searched recursively) or one trace file; "
                   "also -dir")
      ->required();
  prof::ImportLimits import_limits;
  uint64_t max_object_mb = import_limits.max_object_bytes >> 20;
  import
      ->add_option("--max-object-mb", max_object_mb,
                   "the largest single event, top-level JSON member or CSV row read, in MiB (default 64)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  import->add_option("--max-expansion", import_limits.max_expansion,
                     "refuse a gzip trace that expands more than this many times its size once past 64 MiB "
                     "(default 100; 0 = no limit)");
  import->add_option("--max-events", import_limits.max_events,
                     "refuse a trace with more events (or kernel_details rows) than this (default 100000000; 0 = no "
                     "limit)");
  uint64_t max_growth_mb = import_limits.max_store_growth_bytes >> 20;
  import
      ->add_option("--max-store-growth-mb", max_growth_mb,
                   "refuse a trace whose rows would grow portkit.db by more than this many MiB (default 32768; 0 = "
                   "no limit)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 40));

  auto* exp = app.add_subcommand("export", "export summary | export timeline: files from an imported profile");
  exp->require_subcommand(1);
  std::string summary_dir, summary_output;
  std::vector<std::string> summary_formats;
  auto* summary = exp->add_subcommand(
      "summary",
      "op_summary, op_statistic, api_statistic, kernel_statistic, step_trace, host_op_summary into <dir>/summary/");
  summary->add_option("-d,--dir", summary_dir, "the profile folder (holding portkit.db); also -dir")->required();
  summary->add_option("-o,--output", summary_output, "folder for the files (default: <dir>/summary)");
  AddFormatOption(*summary, &summary_formats, {"csv", "json"}, {"csv"});
  bool report_force = false;  // --force of summary, analyse and diff (one subcommand runs)
  const char* kReportForce = "replace files in -o that portkit did not write (refused otherwise)";
  summary->add_flag("--force", report_force, kReportForce);
  uint64_t max_string_mb = static_cast<uint64_t>(prof::kDefaultMaxStoredValueBytes >> 20);
  AddMaxStringOption(*summary, &max_string_mb);
  std::string timeline_dir, timeline_output;
  bool timeline_force = false;
  auto* timeline = exp->add_subcommand("timeline", "Chrome-trace JSON (Perfetto) into <dir>/timeline/timeline.json");
  timeline->add_option("-d,--dir", timeline_dir, "the profile folder (holding portkit.db); also -dir")->required();
  timeline->add_option("-o,--output", timeline_output, "the file to write (default: <dir>/timeline/timeline.json)");
  timeline->add_flag("--force", timeline_force,
                     "replace the output file even when it is not a timeline portkit wrote (refused otherwise)");
  AddMaxStringOption(*timeline, &max_string_mb);

  std::string analyse_dir, analyse_output, fail_on, analyse_target;
  std::vector<std::string> analyse_formats;
  auto* analyse = app.add_subcommand(
      "analyse",
      "advisor: time split, host operators (calls, self and total time), top kernels, and findings with "
      "severity, evidence and advice (into <dir>/analysis/)");
  analyse->add_option("-d,--dir", analyse_dir, "the profile folder; also -dir")->required();
  analyse->add_option("-o,--output", analyse_output, "folder for the reports (default: <dir>/analysis)");
  AddFormatOption(*analyse, &analyse_formats, {"text", "html", "json"}, {"text", "html"});
  analyse->add_flag("--force", report_force, kReportForce);
  analyse->add_option("--fail-on", fail_on, "exit 1 when there is a finding of this severity or higher")
      ->check(CLI::IsMember({"high", "medium", "low", "info"}));
  analyse->add_option("--target", analyse_target, target::TargetOptionHelp(ctx.data_dir, false))
      ->check([&ctx](const std::string& v) { return target::CheckTargetChoice(ctx.data_dir, v, false); });
  AddMaxStringOption(*analyse, &max_string_mb);

  DiffArgs diff_args;
  auto* diff = AddDiffCommand(app, diff_args, &report_force, kReportForce, &max_string_mb);

  QueryArgs query_args;
  auto* query = AddQueryCommand(app, query_args, &max_string_mb, ctx);

  ClusterCommand cluster;
  cluster.Register(app, ctx);

  if (auto rc = Parse(app, argc, argv)) return *rc;
  if (cluster.parsed()) return cluster.Run(ctx);
  if (collect->parsed()) {
    collect_opt.output = collect_output;
    return Collect(collect_opt, ctx);
  }
  if (import->parsed()) {
    import_limits.max_object_bytes = max_object_mb << 20;
    import_limits.max_store_growth_bytes = max_growth_mb << 20;
    return Import(import_dir, import_limits, ctx);
  }
  const auto max_string_bytes = static_cast<int64_t>(max_string_mb << 20);
  if (summary->parsed())
    return ExportSummary(summary_dir, summary_output, summary_formats, report_force, max_string_bytes, ctx);
  if (timeline->parsed()) return ExportTimeline(timeline_dir, timeline_output, timeline_force, max_string_bytes, ctx);
  if (analyse->parsed())
    return Analyse(analyse_dir, analyse_output, analyse_formats, fail_on, analyse_target, report_force,
                   max_string_bytes, ctx);
  if (diff->parsed()) {
    auto& d = diff_args;
    d.opt.base = d.base;
    d.opt.compare = d.compare;
    d.opt.more_base.assign(d.more_base.begin(), d.more_base.end());
    d.opt.more_compare.assign(d.more_compare.begin(), d.more_compare.end());
    if (d.fail_above_option->count()) d.opt.fail_above_percent = d.fail_above;
    d.opt.gate = d.gate == "point"      ? prof::DiffGate::kPoint
                 : d.gate == "interval" ? prof::DiffGate::kInterval
                                        : prof::DiffGate::kSignificant;
    d.opt.max_string_bytes = max_string_bytes;
    return Diff(d.opt, d.output, d.formats, report_force, ctx);
  }
  if (query->parsed()) {
    if (query_args.dir.empty()) query_args.dir = query_args.positional;
    if (query_args.dir.empty() || (!query_args.positional.empty() && query_args.positional != query_args.dir))
      return Fail(ctx, InvalidArgument("prof query: give the profile folder once, as DIR or --dir DIR"));
    query_args.max_string_bytes = max_string_bytes;
    return Query(query_args, ctx);
  }
  return kExitUsage;
}

}  // namespace portkit::cli
