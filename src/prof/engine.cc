// The readers of an imported profile: export summary / timeline, the advisor, diff.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/atomic_file.h"
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
  SummaryTable t{
      "host_op_summary",
      {"Name", "Input Shapes", "Count", "Self Time(us)", "Total Time(us)", "Avg Self Time(us)", "Self Ratio(%)"},
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

Expected<TimelineReport> RunExportTimelineTo(const ExportOptions& options, const fs::path& output, Context& ctx) {
  auto store = OpenImported(options.dir, options.max_string_bytes, ctx);
  if (!store.ok()) return store.status();
  TimelineReport report;
  report.folder = ProfileFolder(options.dir);
  std::error_code ec;
  if (const fs::path folder = output.parent_path(); !folder.empty()) {
    fs::create_directories(folder, ec);
    if (ec) return IoError("cannot create " + folder.string() + ": " + ec.message());
  }
  PORTKIT_RETURN_IF_ERROR(WriteFileAtomicStreamed(
      output, [&](const ReportSet::Sink& sink) { return WriteTimeline(*store, sink, &report.stats); }));
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

namespace {

/// One run of a diff side: imported when not yet, then its totals and per-step series.
Status ReadDiffRun(const fs::path& dir, int64_t max_string_bytes, Context& ctx, Totals* totals, StepSeries* series) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return NotFound(dir.string() + " does not exist");
  if (!fs::exists(StorePath(dir), ec)) {
    ctx.logger.Info(ProfileFolder(dir).string() + " is not imported yet; importing it first.");
    auto imported = RunImport({dir, ImportLimits{}}, ctx);
    if (!imported.ok()) return imported.status();
    PORTKIT_RETURN_IF_ERROR(imported->FirstFailure());
  }
  auto store = OpenImported(dir, max_string_bytes, ctx);
  if (!store.ok()) return store.status();
  auto t = ComputeTotals(*store);
  if (!t.ok()) return t.status();
  auto s = ComputeStepSeries(*store);
  if (!s.ok()) return s.status();
  *totals = std::move(*t);
  *series = std::move(*s);
  return Status::Ok();
}

/// Appends the (key, ns) rows of another run; Deltas sums the rows of a key.
void AddTotals(std::vector<std::pair<std::string, int64_t>>* into,
               const std::vector<std::pair<std::string, int64_t>>& add) {
  into->insert(into->end(), add.begin(), add.end());
}

/// Divides each row's totals by its side's number of runs (the mean per run), then sorts again.
void PerRun(std::vector<DeltaRow>* rows, size_t base_runs, size_t cmp_runs) {
  for (auto& r : *rows) {
    r.base_ns /= static_cast<int64_t>(base_runs);
    r.cmp_ns /= static_cast<int64_t>(cmp_runs);
  }
  SortByDelta(rows);
}

/// Reads every run of one side into its summary, its pooled totals and its per-step series.
Status ReadDiffSide(const fs::path& first, const std::vector<fs::path>& more, int64_t max_string_bytes, Context& ctx,
                    DiffSide* side, Totals* pooled, SideSeries* series) {
  std::vector<fs::path> dirs{first};
  dirs.insert(dirs.end(), more.begin(), more.end());
  double step_sum_ms = 0;
  for (const auto& dir : dirs) {
    Totals t;
    StepSeries s;
    PORTKIT_RETURN_IF_ERROR(ReadDiffRun(dir, max_string_bytes, ctx, &t, &s));
    step_sum_ms += t.step_ms * static_cast<double>(t.steps ? t.steps : 1);
    side->steps += t.steps;
    side->warmup_steps += t.warmup_steps;
    side->warmup_ms += t.warmup_ms;
    AddTotals(&pooled->ops, t.ops);
    AddTotals(&pooled->kernels, t.kernels);
    series->push_back(std::move(s));
  }
  side->folder = ProfileFolder(first);
  side->runs = dirs.size();
  // Runs without marked steps count their whole span as one step, as a single run does.
  size_t counted = 0;
  for (const auto& s : *series) counted += s.step_ns.size();
  side->step_ms = counted ? step_sum_ms / static_cast<double>(counted) : 0;
  side->step_median_ms = Median(FlatSteps(*series)) / 1e6;
  return Status::Ok();
}

std::string Format(const char* format, double a, double b = 0, double c = 0, double d = 0, double e = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, format, a, b, c, d, e);
  return buf;
}

/// The verdict of `--fail-above` (docs/prof.md, "Noise-aware gate") and its reason.
void Decide(const DiffOptions& options, DiffReport* r) {
  if (!options.fail_above_percent) return;
  const double limit = r->fail_above_percent = *options.fail_above_percent;
  if (r->gate == DiffGate::kPoint) {
    const double change = r->step_change_percent.value_or(0);
    r->verdict = change > limit ? Verdict::kRegressed : Verdict::kPass;
    r->verdict_reason = Format("the mean step time changed by %+.2f%% (--gate point: no noise model), ", change) +
                        (change > limit ? "more than " : "not more than ") + Format("--fail-above %.2f%%", limit);
  } else if (const size_t fewest = std::min(r->base.steps, r->compare.steps); fewest < options.min_steps) {
    r->verdict = Verdict::kInconclusive;
    r->verdict_reason = "only " + std::to_string(fewest) + " measured step" + (fewest == 1 ? "" : "s") +
                        " on a side (--min-steps " + std::to_string(options.min_steps) +
                        "): too few to tell a slowdown from noise; profile more steps, or give --gate point to "
                        "compare the mean step times";
  } else if (const auto& judged = r->judges_work ? r->work_change : r->step_change; !judged) {
    r->verdict = Verdict::kInconclusive;
    r->verdict_reason = "the base step time is 0: nothing to compare";
  } else {
    const ChangeInterval& c = *judged;
    const double level = std::round(r->confidence * 100);
    const std::string what =
        std::string(r->judges_work ? "step work time" : "median step time") +
        Format(" changed by %+.2f%% (%.0f%% interval [%+.2f%%, %+.2f%%])", c.percent, level, c.low, c.high);
    if (r->gate == DiffGate::kInterval) {
      r->verdict = c.low > limit ? Verdict::kRegressed : Verdict::kPass;
      r->verdict_reason = what +
                          (c.low > limit ? ": even its lower bound is above " : ": its lower bound is not above ") +
                          Format("--fail-above %.2f%%", limit);
    } else {
      r->verdict = SignificantVerdict(c, limit);
      const std::string gate = Format("--fail-above %.2f%%", limit);
      r->verdict_reason =
          what + (r->verdict == Verdict::kRegressed ? ": above " + gate + ", and the interval is all above 0"
                  : r->verdict == Verdict::kInconclusive
                      ? ": the interval holds both no change and a change above " + gate +
                            "; too noisy to decide: profile more steps, or give more runs a side (--base-run, "
                            "--compare-run)"
                      : ": not a significant slowdown beyond " + gate);
    }
  }
  r->regressed = r->verdict == Verdict::kRegressed;
}

}  // namespace

Expected<DiffReport> RunDiff(const DiffOptions& options, Context& ctx) {
  DiffReport report;
  Totals pooled[2];
  SideSeries series[2];
  PORTKIT_RETURN_IF_ERROR(ReadDiffSide(options.base, options.more_base, options.max_string_bytes, ctx, &report.base,
                                       &pooled[0], &series[0]));
  PORTKIT_RETURN_IF_ERROR(ReadDiffSide(options.compare, options.more_compare, options.max_string_bytes, ctx,
                                       &report.compare, &pooled[1], &series[1]));
  report.operators = Deltas(pooled[0].ops, pooled[1].ops);
  report.kernels = Deltas(pooled[0].kernels, pooled[1].kernels);
  PerRun(&report.operators, report.base.runs, report.compare.runs);
  PerRun(&report.kernels, report.base.runs, report.compare.runs);

  // Fixed seeds, one per side: the same input always gives the same intervals.
  constexpr uint64_t kBaseSeed = 0x706f72746b697431, kCompareSeed = 0x706f72746b697432;
  Resamples draws[2] = {DrawResamples(StepCounts(series[0]), options.resamples, kBaseSeed),
                        DrawResamples(StepCounts(series[1]), options.resamples, kCompareSeed)};
  report.confidence = options.confidence;
  report.resamples = options.resamples;
  const PositionTable positions[2] = {FlatPositions(series[0]), FlatPositions(series[1])};
  report.base.work_ms = WorkTime(positions[0], AllSteps(StepCounts(series[0]))) / 1e6;
  report.compare.work_ms = WorkTime(positions[1], AllSteps(StepCounts(series[1]))) / 1e6;
  report.step_change =
      MedianChangeInterval(FlatSteps(series[0]), draws[0], FlatSteps(series[1]), draws[1], options.confidence);
  AddStepIntervals(&report.operators, false, series[0], draws[0], series[1], draws[1], options.confidence);
  AddStepIntervals(&report.kernels, true, series[0], draws[0], series[1], draws[1], options.confidence);

  if (report.base.step_ms > 0)
    report.step_change_percent = 100.0 * (report.compare.step_ms - report.base.step_ms) / report.base.step_ms;
  report.work_change = WorkChangeInterval(positions[0], StepCounts(series[0]), draws[0], positions[1],
                                          StepCounts(series[1]), draws[1], options.confidence);
  report.min_steps = options.min_steps;
  report.judges_work = pooled[0].kernels.empty() && pooled[1].kernels.empty();
  report.gate = options.gate;
  Decide(options, &report);
  return report;
}

}  // namespace portkit::prof
