#include <algorithm>
#include <cmath>
#include <cstdio>

#include "render/compare_render.h"

namespace portkit::render {
using accuracy::CompareReport;
using accuracy::Verdict;

namespace {

std::string Html(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out.push_back(c);
  }
  return out;
}

}  // namespace

std::string CompareDivergenceText(const CompareReport& report) {
  if (!report.first_divergence) return "";
  const auto& op = *report.first_divergence;
  return op.name + " (" + op.phase + ", #" + std::to_string(op.index) + (op.stack.empty() ? "" : ", " + op.stack) +
         "; " + report.first_divergence_basis + ")" +
         (report.first_divergence_evidence.empty() ? "" : ": " + report.first_divergence_evidence);
}

std::string CompareHtml(const CompareReport& report) {
  const std::string divergence = CompareDivergenceText(report);
  std::vector<std::pair<std::string, double>> series;  // name, 1 - cosine
  for (const auto& r : report.rows) {
    if (!r.output || r.replay || (r.verdict != Verdict::kYes && r.verdict != Verdict::kNo)) continue;
    auto it = r.metrics.find("Cosine");
    double cos = it == r.metrics.end() || std::isnan(it->second) ? -1 : it->second;
    series.emplace_back(r.target.name.empty() ? "N/A" : r.target.name, 1.0 - cos);
  }
  std::string h = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>portkit compare</title><style>"
                  "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse}"
                  "td,th{border:1px solid #ccc;padding:3px 8px}.no{color:#b00}</style></head><body>"
                  "<h1>portkit compare</h1>";
  h += "<p><b>First divergence:</b> " + (divergence.empty() ? std::string("none") : Html(divergence)) + "</p>";
  for (const auto& line : CompareConclusion(report))
    if (line.rfind("First divergence", 0) != 0) h += "<p>" + Html(line) + "</p>";
  h += "<h2>Error along execution order (1 &minus; cosine of each operator output, log scale)</h2>";
  const int w = 1000, ht = 260;
  h += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" +
       std::to_string(ht + 20) + "\">";
  h += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(ht) +
       "\" fill=\"#fafafa\" stroke=\"#ccc\"/>";
  std::string pts;
  for (size_t i = 0; i < series.size(); ++i) {
    double v = std::max(series[i].second, 1e-12);
    double y = ht - (std::log10(v) + 12.0) / 12.5 * ht;  // 1e-12 .. ~3
    double x = series.size() > 1
                   ? static_cast<double>(i) * (w - 10) / static_cast<double>(series.size() - 1) + 5
                   : w / 2.0;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x, std::clamp(y, 2.0, ht - 2.0));
    pts += buf;
  }
  h += "<polyline fill=\"none\" stroke=\"#4a7bd0\" stroke-width=\"1.5\" points=\"" + pts + "\"/>";
  h += "<text x=\"4\" y=\"" + std::to_string(ht + 16) + "\" font-size=\"12\">" + std::to_string(series.size()) +
       " outputs, first to last</text></svg>";
  auto worst = series;
  std::stable_sort(worst.begin(), worst.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (worst.size() > 15) worst.resize(15);
  h += "<h2>Worst outputs</h2><table><tr><th>output (target)</th><th>1 &minus; cosine</th></tr>";
  for (const auto& [name, v] : worst) {
    h += "<tr><td>" + Html(name) + "</td><td>" + FormatNumber(v) + "</td></tr>";
  }
  return h + "</table></body></html>\n";
}

}  // namespace portkit::render
