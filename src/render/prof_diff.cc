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

std::vector<std::string> Cells(const prof::DeltaRow& r) {
  return {r.key, Ms(r.base_ns), Ms(r.cmp_ns), Ms(r.cmp_ns - r.base_ns),
          Pct(static_cast<double>(r.base_ns), static_cast<double>(r.cmp_ns))};
}

}  // namespace

std::string ProfDiffText(const prof::DiffReport& r) {
  char line[256];
  std::snprintf(line, sizeof line, "\nstep time: %.3f ms (%zu steps) -> %.3f ms (%zu steps): %s\n", r.base.step_ms,
                r.base.steps, r.compare.step_ms, r.compare.steps, Pct(r.base.step_ms, r.compare.step_ms).c_str());
  std::string out = line;
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
      top.push_back(std::move(cells));
    }
    if (top.empty()) continue;
    out += std::string("\ntop ") + name + " by |delta| (all in diff/diff_" + name + ".csv):\n";
    out += RenderTable({name, "base ms", "compare ms", "delta ms", "delta"}, top);
  }
  return out;
}

std::string ProfDiffCsv(const std::vector<prof::DeltaRow>& rows) {
  CsvWriter w({"Name", "Base Time(ms)", "Compare Time(ms)", "Delta(ms)", "Delta(%)"});
  for (const auto& r : rows) w.AddRow(Cells(r));
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
    j.EndObject();
  }
  j.Key("step_change_percent");
  if (r.step_change_percent) j.Fixed(*r.step_change_percent, 4);
  else j.Null();
  j.Key("regressed").Bool(r.regressed);
  using Table = std::pair<const char*, const std::vector<prof::DeltaRow>*>;
  for (const auto& [key, rows] : {Table{"operators", &r.operators}, Table{"kernels", &r.kernels}}) {
    j.Key(key).BeginArray();
    for (const auto& row : *rows)
      j.BeginObject()
          .Key("name").String(row.key)
          .Key("base_ns").Int(row.base_ns)
          .Key("compare_ns").Int(row.cmp_ns)
          .Key("delta_ns").Int(row.cmp_ns - row.base_ns)
          .EndObject();
    j.EndArray();
  }
  j.EndObject();
  return j.str() + "\n";
}

}  // namespace portkit::render
