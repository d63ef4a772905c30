#include <algorithm>
#include <cstdio>
#include <map>

#include "core/json_writer.h"
#include "core/table.h"
#include "prof/advisor/rule_list.h"

namespace portkit::prof {

std::string Duration(int64_t ns) {
  char buf[32];
  if (ns >= 1'000'000) std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  else std::snprintf(buf, sizeof buf, "%.1f us", static_cast<double>(ns) / 1e3);
  return buf;
}

std::string Share(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

namespace {

std::vector<std::pair<std::string, int64_t>> Top(const Profile& p, bool device, size_t n) {
  std::map<std::string, int64_t> totals;
  for (const auto& e : p.events)
    if (device ? p.IsDevice(e) : e.kind == "cpu_op") totals[e.name] += e.dur;
  std::vector<std::pair<std::string, int64_t>> v(totals.begin(), totals.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  if (v.size() > n) v.resize(n);
  return v;
}

std::vector<std::pair<std::string, int64_t>> Split(const Breakdown& b) {
  std::vector<std::pair<std::string, int64_t>> v = {{"host operators", b.host_ops}};
  if (b.device_busy > 0) {
    v.push_back({"device compute", b.compute});
    v.push_back({"device communication", b.communication});
    v.push_back({"device memcpy/memset", b.memcpy});
    v.push_back({"device idle", b.wall - b.device_busy});
  }
  return v;
}

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
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"" +
                    std::to_string(rows.size() * 24 + 8) + "\">";
  for (size_t i = 0; i < rows.size(); ++i) {
    int y = static_cast<int>(i) * 24 + 4;
    int w = static_cast<int>(420.0 * static_cast<double>(rows[i].second) / static_cast<double>(max));
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

std::string AdvisorText(const Profile& p, const Breakdown& b, const std::vector<AdvisorFinding>& findings) {
  std::string out = "portkit prof analyse\n\n";
  out += "profiled time: " + Duration(b.wall) + (b.steps ? " over " + std::to_string(b.steps) + " steps (" +
                                                               Duration(b.wall / static_cast<int64_t>(b.steps)) + " per step)"
                                                         : " (no steps marked)") + "\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [what, ns] : Split(b)) rows.push_back({what, Duration(ns), Share(ns, b.wall)});
  out += RenderTable({"time split", "time", "share"}, rows);
  for (bool device : {false, true}) {
    auto top = Top(p, device, 10);
    if (top.empty()) continue;
    rows.clear();
    for (const auto& [name, ns] : top)
      rows.push_back({name.size() > 70 ? name.substr(0, 67) + "..." : name, Duration(ns)});
    out += "\n" + RenderTable({device ? "top device tasks" : "top operators", "total time"}, rows);
  }
  out += "\nfindings (" + std::to_string(findings.size()) + "):\n";
  if (findings.empty()) out += "  none\n";
  for (const auto& f : findings) {
    out += "  [" + std::string(SeverityName(f.severity)) + "] " + f.title + " (" + f.rule + ")\n";
    out += "      evidence: " + f.evidence + "\n";
    if (!f.advice.empty()) out += "      advice:   " + f.advice + "\n";
  }
  return out;
}

std::string AdvisorHtml(const Profile& p, const Breakdown& b, const std::vector<AdvisorFinding>& findings) {
  std::string h =
      "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>portkit prof analyse</title><style>"
      "body{font-family:sans-serif;margin:2em;max-width:1000px}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}.high{color:#b00}.medium{color:#b60}"
      ".low{color:#666}</style></head><body><h1>portkit prof analyse</h1>";
  h += "<p>Profiled time " + Escape(Duration(b.wall)) +
       (b.steps ? " over " + std::to_string(b.steps) + " steps" : " (no steps marked)") + ".</p>";
  h += "<h2>Time split</h2>" + Bars(Split(b), b.wall);
  auto ops = Top(p, false, 10), tasks = Top(p, true, 10);
  if (!ops.empty()) h += "<h2>Top operators</h2>" + Bars(ops, 0);
  if (!tasks.empty()) h += "<h2>Top device tasks</h2>" + Bars(tasks, 0);
  h += "<h2>Findings</h2>";
  if (findings.empty()) h += "<p>None.</p>";
  else {
    h += "<table><tr><th>severity</th><th>finding</th><th>evidence</th><th>advice</th><th>rule</th></tr>";
    for (const auto& f : findings)
      h += std::string("<tr><td class=\"") + SeverityName(f.severity) + "\">" + SeverityName(f.severity) + "</td><td>" +
           Escape(f.title) + "</td><td>" + Escape(f.evidence) + "</td><td>" + Escape(f.advice) + "</td><td>" +
           Escape(f.rule) + "</td></tr>";
    h += "</table>";
  }
  return h + "</body></html>\n";
}

}  // namespace portkit::prof
