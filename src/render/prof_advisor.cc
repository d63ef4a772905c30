#include "render/prof_advisor.h"

#include <algorithm>

#include "core/json_writer.h"
#include "core/table.h"

namespace portkit::render {
namespace {
using prof::Duration;
using prof::Share;

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string Bars(const std::vector<std::pair<std::string, int64_t>>& rows, int64_t whole) {
  int64_t max = 1;
  for (const auto& r : rows) max = std::max(max, r.second);
  // Label (up to 60 characters) left of x = 400, bar up to 380 px, then the value: "12.345 ms
  // (100.0%)" needs ~130 px, so the picture is 960 px wide and no value is cut off.
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" height=\"" +
                    std::to_string(rows.size() * 24 + 8) + "\">";
  for (size_t i = 0; i < rows.size(); ++i) {
    int y = static_cast<int>(i) * 24 + 4;
    int w = static_cast<int>(380.0 * static_cast<double>(rows[i].second) / static_cast<double>(max));
    std::string label = rows[i].first.size() > 60 ? rows[i].first.substr(0, 57) + "..." : rows[i].first;
    svg += "<text x=\"0\" y=\"" + std::to_string(y + 15) + "\" font-size=\"12\">" + Escape(label) + "</text>";
    svg += "<rect x=\"400\" y=\"" + std::to_string(y) + "\" width=\"" + std::to_string(std::max(w, 1)) +
           "\" height=\"18\" fill=\"#4a7bd0\"/>";
    svg += "<text x=\"" + std::to_string(405 + w) + "\" y=\"" + std::to_string(y + 15) + "\" font-size=\"12\">" +
           Escape(Duration(rows[i].second) + (whole ? " (" + Share(rows[i].second, whole) + ")" : "")) + "</text>";
  }
  return svg + "</svg>";
}

}  // namespace

std::string ProfAdvisorText(const prof::AnalyseReport& r) {
  const prof::Breakdown& b = r.breakdown;
  std::string out = "portkit prof analyse\n\n";
  out +=
      "profiled time: " + Duration(b.wall) +
      (b.steps ? " over " + std::to_string(b.steps) + " steps (" + Duration(b.wall / static_cast<int64_t>(b.steps)) +
                     " per step)"
               : " (no steps marked)") +
      (b.warmup_steps ? "; warm-up (ProfilerStep#0, " + std::to_string(b.warmup_steps) + " trace" +
                            (b.warmup_steps > 1 ? "s" : "") + ") reported apart: " + Duration(b.warmup) + ", left out"
                      : std::string()) +
      "\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [what, ns] : r.time_split) rows.push_back({what, Duration(ns), Share(ns, b.wall)});
  out += RenderTable({"time split", "time", "share"}, rows);
  auto cut = [](const std::string& name) { return name.size() > 70 ? name.substr(0, 67) + "..." : name; };
  if (!r.host_ops.empty()) {
    rows.clear();
    for (const auto& op : r.host_ops)
      rows.push_back({cut(op.name), std::to_string(op.count), Duration(op.self_ns), Duration(op.total_ns)});
    out += "\n" + RenderTable({"host operators", "calls", "self time", "total time"}, rows);
  }
  if (!r.top_device_tasks.empty()) {
    rows.clear();
    for (const auto& [name, ns] : r.top_device_tasks) rows.push_back({cut(name), Duration(ns)});
    out += "\n" + RenderTable({"top device tasks", "total time"}, rows);
  }
  out += "\nfindings (" + std::to_string(r.findings.size()) + "):\n";
  if (r.findings.empty()) out += "  none\n";
  for (const auto& f : r.findings) {
    out += "  [" + std::string(prof::SeverityName(f.severity)) + "] " + f.title + " (" + f.rule + ")\n";
    out += "      evidence: " + f.evidence + "\n";
    if (!f.advice.empty()) out += "      advice:   " + f.advice + "\n";
  }
  return out;
}

std::string ProfAdvisorHtml(const prof::AnalyseReport& r) {
  const prof::Breakdown& b = r.breakdown;
  std::string h =
      "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>portkit prof analyse</title><style>"
      "body{font-family:sans-serif;margin:2em;max-width:1000px}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}.high{color:#b00}.medium{color:#b60}"
      ".low{color:#666}</style></head><body><h1>portkit prof analyse</h1>";
  h += "<p>Profiled time " + Escape(Duration(b.wall)) +
       (b.steps ? " over " + std::to_string(b.steps) + " steps" : " (no steps marked)") +
       (b.warmup_steps ? "; warm-up step (ProfilerStep#0) reported apart: " + Escape(Duration(b.warmup)) + ", left out"
                       : std::string()) +
       ".</p>";
  h += "<h2>Time split</h2>" + Bars(r.time_split, b.wall);
  if (!r.top_operators.empty()) h += "<h2>Top operators</h2>" + Bars(r.top_operators, 0);
  if (!r.host_ops.empty()) {
    h += "<h2>Host operators</h2><table><tr><th>operator</th><th>calls</th><th>self time</th><th>total time</th></tr>";
    for (const auto& op : r.host_ops)
      h += "<tr><td>" + Escape(op.name) + "</td><td>" + std::to_string(op.count) + "</td><td>" +
           Escape(Duration(op.self_ns)) + "</td><td>" + Escape(Duration(op.total_ns)) + "</td></tr>";
    h += "</table>";
  }
  if (!r.top_device_tasks.empty()) h += "<h2>Top device tasks</h2>" + Bars(r.top_device_tasks, 0);
  h += "<h2>Findings</h2>";
  if (r.findings.empty()) {
    h += "<p>None.</p>";
  } else {
    h += "<table><tr><th>severity</th><th>finding</th><th>evidence</th><th>advice</th><th>rule</th></tr>";
    for (const auto& f : r.findings)
      h += std::string("<tr><td class=\"") + prof::SeverityName(f.severity) + "\">" + prof::SeverityName(f.severity) +
           "</td><td>" + Escape(f.title) + "</td><td>" + Escape(f.evidence) + "</td><td>" + Escape(f.advice) +
           "</td><td>" + Escape(f.rule) + "</td></tr>";
    h += "</table>";
  }
  return h + "</body></html>\n";
}

std::string ProfAdvisorJson(const prof::AnalyseReport& r) {
  const prof::Breakdown& b = r.breakdown;
  JsonWriter j;
  j.BeginObject();
  j.Key("profiled_ns").Int(b.wall);
  j.Key("steps").Int(static_cast<int64_t>(b.steps));
  j.Key("warmup_steps").Int(static_cast<int64_t>(b.warmup_steps));
  j.Key("warmup_ns").Int(b.warmup);
  j.Key("time_split").BeginArray();
  for (const auto& [what, ns] : r.time_split) {
    j.BeginObject().Key("what").String(what).Key("ns").Int(ns);
    j.Key("share").Fixed(b.wall ? static_cast<double>(ns) / static_cast<double>(b.wall) : 0.0, 4).EndObject();
  }
  j.EndArray();
  for (bool device : {false, true}) {
    j.Key(device ? "top_device_tasks" : "top_operators").BeginArray();
    for (const auto& [name, ns] : device ? r.top_device_tasks : r.top_operators)
      j.BeginObject().Key("name").String(name).Key("ns").Int(ns).EndObject();
    j.EndArray();
  }
  j.Key("host_operators").BeginArray();
  for (const auto& op : r.host_ops)
    j.BeginObject()
        .Key("name")
        .String(op.name)
        .Key("count")
        .Int(op.count)
        .Key("self_ns")
        .Int(op.self_ns)
        .Key("total_ns")
        .Int(op.total_ns)
        .EndObject();
  j.EndArray();
  j.Key("findings").BeginArray();
  for (const auto& f : r.findings) {
    j.BeginObject();
    j.Key("rule").String(f.rule).Key("severity").String(prof::SeverityName(f.severity));
    j.Key("title").String(f.title).Key("evidence").String(f.evidence).Key("advice").String(f.advice);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.str() + "\n";
}

}  // namespace portkit::render
