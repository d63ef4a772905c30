#include "render/prof_diff.h"

#include <cstdio>

#include "core/csv_writer.h"
#include "core/json_writer.h"
#include "core/table.h"

namespace portkit::render {
namespace {

std::string Ms(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e6);
  return buf;
}

std::string Pct(double base, double cmp) {
  if (base == 0) return cmp == 0 ? "0.00%" : "new";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f%%", 100.0 * (cmp - base) / base);
  return buf;
}

std::string Fixed(double v, const char* format = "%+.2f") {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string MsOf(double ns) { return Fixed(ns / 1e6, "%.3f"); }

/// "[-1.20%, +3.40%]", or "-" without an interval.
std::string Interval(const std::optional<prof::ChangeInterval>& c) {
  if (!c) return "-";
  return "[" + Fixed(c->low) + "%, " + Fixed(c->high) + "%]";
}

std::vector<std::string> Cells(const prof::DeltaRow& r) {
  return {r.key, Ms(r.base_ns), Ms(r.cmp_ns), Ms(r.cmp_ns - r.base_ns),
          Pct(static_cast<double>(r.base_ns), static_cast<double>(r.cmp_ns))};
}

/// Cells, then the per-step columns: medians, their change and its interval bounds.
std::vector<std::string> CsvCells(const prof::DeltaRow& r) {
  auto cells = Cells(r);
  cells.push_back(MsOf(r.base_step_ns));
  cells.push_back(MsOf(r.cmp_step_ns));
  for (double prof::ChangeInterval::*field :
       {&prof::ChangeInterval::percent, &prof::ChangeInterval::low, &prof::ChangeInterval::high})
    cells.push_back(r.change ? Fixed((*r.change).*field, "%.2f") : "");
  return cells;
}

}  // namespace

const char* GateName(prof::DiffGate gate) {
  switch (gate) {
    case prof::DiffGate::kSignificant: return "significant";
    case prof::DiffGate::kInterval: return "interval";
    default: return "point";
  }
}

const char* VerdictName(prof::Verdict verdict) {
  switch (verdict) {
    case prof::Verdict::kPass: return "pass";
    case prof::Verdict::kRegressed: return "regressed";
    case prof::Verdict::kInconclusive: return "inconclusive";
    default: return "not asked";
  }
}

std::string ProfDiffText(const prof::DiffReport& r) {
  char line[256];
  std::snprintf(line, sizeof line, "\nstep time: %.3f ms (%zu steps) -> %.3f ms (%zu steps): %s\n", r.base.step_ms,
                r.base.steps, r.compare.step_ms, r.compare.steps, Pct(r.base.step_ms, r.compare.step_ms).c_str());
  std::string out = line;
  const int level = static_cast<int>(r.confidence * 100 + 0.5);
  if (r.step_change) {
    std::snprintf(
        line, sizeof line,
        "median step: %.3f ms (%zu run%s) -> %.3f ms (%zu run%s): %+.2f%%, %d%% interval [%+.2f%%, %+.2f%%]\n",
        r.base.step_median_ms, r.base.runs, r.base.runs == 1 ? "" : "s", r.compare.step_median_ms, r.compare.runs,
        r.compare.runs == 1 ? "" : "s", r.step_change->percent, level, r.step_change->low, r.step_change->high);
    out += line;
  }
  if (r.work_change) {
    std::snprintf(line, sizeof line, "step work: %.3f ms -> %.3f ms: %+.2f%%, %d%% interval [%+.2f%%, %+.2f%%]\n",
                  r.base.work_ms, r.compare.work_ms, r.work_change->percent, level, r.work_change->low,
                  r.work_change->high);
    out += line;
  }
  if (r.verdict != prof::Verdict::kNotAsked) {
    std::snprintf(line, sizeof line, "gate (%s, --fail-above %.2f%%, %s): %s: ", GateName(r.gate), r.fail_above_percent,
                  r.judges_work ? "step work" : "median step", VerdictName(r.verdict));
    out += line + r.verdict_reason + "\n";
  }
  for (const auto* side : {&r.base, &r.compare}) {
    if (!side->warmup_steps) continue;
    std::snprintf(line, sizeof line, "%s: warm-up step (ProfilerStep#0) reported apart, left out: %.3f ms\n",
                  side == &r.base ? "base" : "compare", side->warmup_ms);
    out += line;
  }
  using Table = std::pair<const char*, const std::vector<prof::DeltaRow>*>;
  for (const auto& [name, rows] : {Table{"operators", &r.operators}, Table{"kernels", &r.kernels}}) {
    std::vector<std::vector<std::string>> top;
    for (const auto& row : *rows) {
      if (top.size() == 10) break;
      auto cells = Cells(row);
      if (cells[0].size() > 60) cells[0] = cells[0].substr(0, 57) + "...";
      cells.push_back(Interval(row.change));
      top.push_back(std::move(cells));
    }
    if (top.empty()) continue;
    out += std::string("\ntop ") + name + " by |delta| (all in diff/diff_" + name + ".csv):\n";
    out += RenderTable({name, "base ms", "compare ms", "delta ms", "delta", std::to_string(level) + "% interval/step"},
                       top);
  }
  return out;
}

std::string ProfDiffCsv(const std::vector<prof::DeltaRow>& rows) {
  CsvWriter w({"Name", "Base Time(ms)", "Compare Time(ms)", "Delta(ms)", "Delta(%)", "Base Step Median(ms)",
               "Compare Step Median(ms)", "Step Change(%)", "Step Change Low(%)", "Step Change High(%)"});
  for (const auto& r : rows) w.AddRow(CsvCells(r));
  return w.str();
}

std::string ProfDiffJson(const prof::DiffReport& r) {
  JsonWriter j;
  j.BeginObject();
  using Side = std::pair<const char*, const prof::DiffSide*>;
  for (const auto& [key, side] : {Side{"base", &r.base}, Side{"compare", &r.compare}}) {
    j.Key(key).BeginObject();
    j.Key("folder").String(side->folder.string());
    j.Key("step_ms").Fixed(side->step_ms, 6);
    j.Key("steps").Int(static_cast<int64_t>(side->steps));
    j.Key("warmup_steps").Int(static_cast<int64_t>(side->warmup_steps));
    j.Key("warmup_ms").Fixed(side->warmup_ms, 6);
    j.Key("runs").Int(static_cast<int64_t>(side->runs));
    j.Key("step_median_ms").Fixed(side->step_median_ms, 6);
    j.Key("work_ms").Fixed(side->work_ms, 6);
    j.EndObject();
  }
  j.Key("step_change_percent");
  if (r.step_change_percent) j.Fixed(*r.step_change_percent, 4);
  else j.Null();
  auto interval = [&j](const std::optional<prof::ChangeInterval>& c) {
    if (!c) {
      j.Null();
      return;
    }
    j.BeginObject().Key("percent").Fixed(c->percent, 4).Key("low").Fixed(c->low, 4).Key("high").Fixed(c->high, 4);
    j.EndObject();
  };
  j.Key("step_change");
  interval(r.step_change);
  j.Key("confidence").Fixed(r.confidence, 4);
  j.Key("resamples").Int(r.resamples);
  j.Key("work_change");
  interval(r.work_change);
  j.Key("min_steps").Int(static_cast<int64_t>(r.min_steps));
  j.Key("gate").String(GateName(r.gate));
  j.Key("gate_statistic").String(r.judges_work ? "step_work" : "step_median");
  j.Key("fail_above");
  if (r.verdict != prof::Verdict::kNotAsked) j.Fixed(r.fail_above_percent, 4);
  else j.Null();
  j.Key("verdict").String(r.verdict == prof::Verdict::kNotAsked ? "not_asked" : VerdictName(r.verdict));
  j.Key("verdict_reason").String(r.verdict_reason);
  j.Key("regressed").Bool(r.regressed);
  using Table = std::pair<const char*, const std::vector<prof::DeltaRow>*>;
  for (const auto& [key, rows] : {Table{"operators", &r.operators}, Table{"kernels", &r.kernels}}) {
    j.Key(key).BeginArray();
    for (const auto& row : *rows) {
      j.BeginObject()
          .Key("name")
          .String(row.key)
          .Key("base_ns")
          .Int(row.base_ns)
          .Key("compare_ns")
          .Int(row.cmp_ns)
          .Key("delta_ns")
          .Int(row.cmp_ns - row.base_ns)
          .Key("base_step_median_ns")
          .Fixed(row.base_step_ns, 1)
          .Key("compare_step_median_ns")
          .Fixed(row.cmp_step_ns, 1)
          .Key("step_change");
      interval(row.change);
      j.EndObject();
    }
    j.EndArray();
  }
  j.EndObject();
  return j.str() + "\n";
}

}  // namespace portkit::render
