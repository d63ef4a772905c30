// The readers of an imported profile: export summary / timeline, the advisor, diff.
#include <algorithm>
#include <cstdio>

#include "prof/api.h"

namespace portkit::prof {
namespace fs = std::filesystem;
namespace {

/// The store of an imported profile folder, read-only.
/// An import that was killed (or is still running) is said on the console: the profile read is
/// then not the whole of it (docs/safety.md, Crash markers).
/// Rows out of range (an edited store) are left out of everything read and said here.
Expected<Store> OpenImported(const fs::path& dir, int64_t max_string_bytes, Context& ctx) {
  fs::path db_path = StorePath(dir);
  std::error_code ec;
  if (!fs::exists(db_path, ec))
    return NotFound("no profile database in " + ProfileFolder(dir).string() + "; run `portkit prof import -dir " +
                    dir.string() + "` first");
  for (const auto& w : UnfinishedImportWarnings(ProfileFolder(dir))) ctx.logger.Warning(w);
  StoreReadOptions read;
  read.max_value_bytes = max_string_bytes;
  auto store = Store::OpenForReading(db_path, read);
  if (!store.ok()) return store.status();
  if (std::string w = store->read_notes().Warning(db_path.string()); !w.empty()) ctx.logger.Warning(w);
  return store;
}


SummaryTable HostOpSummary(const Profile& p) {
  SummaryTable t{"host_op_summary",
                 {"Name", "Input Shapes", "Count", "Self Time(us)", "Total Time(us)", "Avg Self Time(us)",
                  "Self Ratio(%)"},
                 {},
                 {false, false, true, true, true, true, true}};
  auto rows = HostOpTable(p, true);
  int64_t all = 0;
  for (const auto& r : rows) all += r.self_ns;
  auto fixed = [](double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return std::string(buf);
  };
  for (const auto& r : rows)
    t.rows.push_back({r.name, r.input_dims, std::to_string(r.count), Micros(r.self_ns), Micros(r.total_ns),
                      fixed(static_cast<double>(r.self_ns) / static_cast<double>(r.count) / 1000.0, 3),
                      fixed(all ? 100.0 * static_cast<double>(r.self_ns) / static_cast<double>(all) : 0.0, 2)});
  return t;
}

}  // namespace

Expected<SummaryReport> RunExportSummary(const ExportOptions& options, Context& ctx) {
  auto store = OpenImported(options.dir, options.max_string_bytes, ctx);
  if (!store.ok()) return store.status();
  auto tables = BuildSummaries(*store);
  if (!tables.ok()) return tables.status();
  auto profile = Profile::Load(*store, ctx.data_dir);
  if (!profile.ok()) return profile.status();
  tables->push_back(HostOpSummary(*profile));
  return SummaryReport{ProfileFolder(options.dir), std::move(*tables)};
}

Expected<TimelineReport> RunExportTimeline(const ExportOptions& options, Context& ctx) {
  auto store = OpenImported(options.dir, options.max_string_bytes, ctx);
  if (!store.ok()) return store.status();
  TimelineReport report;
  report.folder = ProfileFolder(options.dir);
  auto json = BuildTimeline(*store, &report.stats);
  if (!json.ok()) return json.status();
  report.json = std::move(*json);
  return report;
}

size_t AnalyseReport::CountAtLeast(Severity at_least) const {
  // Severities are ordered most severe first (kHigh = 0).
  return static_cast<size_t>(std::count_if(findings.begin(), findings.end(), [&](const AdvisorFinding& f) {
    return static_cast<int>(f.severity) <= static_cast<int>(at_least);
  }));
}

Expected<AnalyseReport> RunAnalyse(const AnalyseOptions& options, Context& ctx) {
  auto store = OpenImported(options.dir, options.max_string_bytes, ctx);
  if (!store.ok()) return store.status();
  auto profile = Profile::Load(*store, ctx.data_dir, options.target);
  if (!profile.ok()) return profile.status();
  AnalyseReport report;
  report.folder = ProfileFolder(options.dir);
  for (const auto& rule : MakeAdvisorRules()) rule->Check(*profile, report.findings);
  std::stable_sort(report.findings.begin(), report.findings.end(),
                   [](const AdvisorFinding& a, const AdvisorFinding& b) { return a.severity < b.severity; });
  report.breakdown = ComputeBreakdown(*profile);
  report.time_split = TimeSplit(report.breakdown);
  report.top_operators = TopByTime(*profile, false, options.top);
  report.top_device_tasks = TopByTime(*profile, true, options.top);
  report.host_ops = HostOpTable(*profile, false);
  if (report.host_ops.size() > options.top) report.host_ops.resize(options.top);
  return report;
}

Expected<DiffReport> RunDiff(const DiffOptions& options, Context& ctx) {
  DiffReport report;
  Totals sides[2];
  const fs::path* dirs[2] = {&options.base, &options.compare};
  DiffSide* out[2] = {&report.base, &report.compare};
  for (int i = 0; i < 2; ++i) {
    std::error_code ec;
    if (!fs::exists(*dirs[i], ec)) return NotFound(dirs[i]->string() + " does not exist");
    if (!fs::exists(StorePath(*dirs[i]), ec)) {
      ctx.logger.Info(ProfileFolder(*dirs[i]).string() + " is not imported yet; importing it first.");
      auto imported = RunImport({*dirs[i], ImportLimits{}}, ctx);
      if (!imported.ok()) return imported.status();
      PORTKIT_RETURN_IF_ERROR(imported->FirstFailure());
    }
    auto store = OpenImported(*dirs[i], options.max_string_bytes, ctx);
    if (!store.ok()) return store.status();
    auto totals = ComputeTotals(*store);
    if (!totals.ok()) return totals.status();
    sides[i] = std::move(*totals);
    *out[i] = DiffSide{ProfileFolder(*dirs[i]), sides[i].step_ms, sides[i].steps, sides[i].warmup_steps,
                       sides[i].warmup_ms};
  }
  report.operators = Deltas(sides[0].ops, sides[1].ops);
  report.kernels = Deltas(sides[0].kernels, sides[1].kernels);
  if (report.base.step_ms > 0)
    report.step_change_percent = 100.0 * (report.compare.step_ms - report.base.step_ms) / report.base.step_ms;
  report.regressed = options.fail_above_percent && report.step_change_percent &&
                     *report.step_change_percent > *options.fail_above_percent;
  return report;
}

}  // namespace portkit::prof
