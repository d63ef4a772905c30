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

std::string CompareDriftText(const CompareReport& report) {
  if (!report.drift_start) return "";
  const auto& op = *report.drift_start;
  return "Precision drift starts at " + op.name + " (" + op.phase + ", #" + std::to_string(op.index) +
         (op.stack.empty() ? "" : ", " + op.stack) + ")" +
         (report.drift_evidence.empty() ? "" : ": " + report.drift_evidence) +
         ". Ordinary rounding may explain it, so no operator is named the culprit: run with replay to localise it.";
}

namespace {

/// One cell of the evidence table: a metric of a row, or "N/A".
std::string Metric(const accuracy::CompareRow& r, const char* name) {
  if (!r.compared) return "N/A";
  auto it = r.metrics.find(name);
  return it == r.metrics.end() ? "N/A" : FormatNumber(it->second);
}

/// The tensor part of a row name: `input.0`, `output.0`, `replay.output.0`.
std::string TensorKey(const std::string& name) {
  for (const char* part : {".replay.", ".input", ".output"}) {
    size_t at = name.find(part);
    if (at != std::string::npos) return name.substr(at + 1);
  }
  return name;
}

/// A short operator label for the chart: `aten::gelu #12`.
std::string OpLabel(const std::string& row_name) {
  // row names are op.phase.index.key
  size_t key = row_name.find(".input");
  if (key == std::string::npos) key = row_name.find(".output");
  std::string head = row_name.substr(0, key);  // op.phase.index
  size_t idx = head.rfind('.');
  size_t phase = idx == std::string::npos ? std::string::npos : head.rfind('.', idx - 1);
  if (phase == std::string::npos) return head;
  std::string name = head.substr(0, phase);
  std::string ph = head.substr(phase + 1, idx - phase - 1);
  return name + (ph == "backward" ? " (bwd)" : "") + " #" + head.substr(idx + 1);
}

/// The module an operator ran in and the user code that called it.
std::string ModuleAndStack(const accuracy::CompareOp& op) {
  std::string h;
  if (!op.module.empty()) h += "<p><b>Module:</b> " + Html(op.module) + "</p>";
  if (!op.stack.empty()) h += "<p><b>Stack:</b> <code>" + Html(op.stack) + "</code></p>";
  if (!op.forward.empty()) h += "<p><b>Backward of:</b> " + Html(op.forward) + "</p>";
  return h;
}

/// The state box at the top: the culprit first (what, where, on what evidence), or the drift and
/// what to do, or no divergence.
Status AppendStateBox(const CompareReport& report, std::string& h) {
  if (report.first_divergence) {
    const auto& op = *report.first_divergence;
    h += "<div id=\"culprit\" data-state=\"culprit\"><h2>Culprit: <span id=\"culprit-name\">" + Html(op.name) +
         "</span> (" + Html(op.phase) + ", operator #" + std::to_string(op.index) + ")</h2>";
    h += "<p><b>Why:</b> " + Html(report.first_divergence_basis) +
         (report.first_divergence_evidence.empty() ? "" : " &mdash; " + Html(report.first_divergence_evidence)) +
         "</p>";
    h += ModuleAndStack(op);
    // Evidence: every tensor of the operator, inputs (inherited error) against outputs (live)
    // against replayed outputs (computed from the reference's inputs: its own error).
    h += "<table><tr><th>tensor</th><th>role</th><th>verdict</th><th>Cosine</th><th>MaxAbsErr</th>"
         "<th>One Thousandth Err Ratio</th><th>Five Thousandths Err Ratio</th></tr>";
    PORTKIT_RETURN_IF_ERROR(report.ForEachRow([&](const accuracy::CompareRow& r) {
      if (r.target_op != report.first_divergence_op || report.first_divergence_op < 0) return Status::Ok();
      std::string key = TensorKey(r.target.name.empty() ? r.reference.name : r.target.name);
      const char* role = r.replay   ? "replayed output (reference inputs: its own error)"
                         : r.output ? "live output"
                                    : "input (error it was given)";
      h += std::string("<tr") + (r.verdict == Verdict::kNo ? " class=\"no\"" : "") + "><td>" + Html(key) + "</td><td>" +
           role + "</td><td>" + std::string(accuracy::VerdictName(r.verdict)) + "</td><td>" + Metric(r, "Cosine") +
           "</td><td>" + Metric(r, "MaxAbsErr") + "</td><td>" + Metric(r, "One Thousandth Err Ratio") + "</td><td>" +
           Metric(r, "Five Thousandths Err Ratio") + "</td></tr>";
      return Status::Ok();
    }));
    h += "</table></div>";
  } else if (report.drift_start) {
    const auto& op = *report.drift_start;
    h += "<div id=\"culprit\" class=\"drift\" data-state=\"drift\"><h2>Precision drift, no localised culprit: "
         "starts at <span id=\"drift-name\">" +
         Html(op.name) + "</span> (" + Html(op.phase) + ", operator #" + std::to_string(op.index) + ")</h2>";
    if (!report.drift_evidence.empty()) h += "<p><b>Why:</b> " + Html(report.drift_evidence) + "</p>";
    h += ModuleAndStack(op);
    h += "<p><b>What to do:</b> ordinary rounding of the target's types may explain this error, so no operator is "
         "named. Dump the target again with replay (the dumper's <code>load_file_path</code> = the reference dump, "
         "<code>use_load=True</code>) and compare again: each operator then runs on the reference's inputs and "
         "the one whose own error exceeds its rounding is named.</p></div>";
  } else {
    h += "<div id=\"culprit\" class=\"ok\" data-state=\"none\"><h2>No divergence</h2><p>No operator's output "
         "differs beyond what rounding allows.</p></div>";
  }
  return Status::Ok();
}

}  // namespace

std::string CompareHtml(const CompareReport& report) {
  return Collect([&](const ReportSet::Sink& sink) { return CompareHtmlTo(report, sink); });
}

Status CompareHtmlTo(const CompareReport& report, const ReportSet::Sink& sink) {
  // The chart's points are the judged outputs; their names are read on a second walk over the
  // rows, as the marks are written (a 300k-output chart keeps no names).
  struct Point {
    double err;
    long op;
  };
  auto charted = [](const accuracy::CompareRow& r) {
    return r.output && !r.replay && (r.verdict == Verdict::kYes || r.verdict == Verdict::kNo);
  };
  static const std::string kNa = "N/A";
  auto name_of = [](const accuracy::CompareRow& r) -> const std::string& {
    return r.target.name.empty() ? kNa : r.target.name;
  };
  std::vector<Point> series;  // 1 - cosine of each output, in execution order
  PORTKIT_RETURN_IF_ERROR(report.ForEachRow([&](const accuracy::CompareRow& r) {
    if (!charted(r)) return Status::Ok();
    auto it = r.metrics.find("Cosine");
    double cos = it == r.metrics.end() || std::isnan(it->second) ? -1 : it->second;
    series.push_back({1.0 - cos, r.target_op});
    return Status::Ok();
  }));
  std::string h =
      "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>portkit compare</title><style>"
      "body{font-family:sans-serif;margin:2em;max-width:1150px}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}.no{color:#b00}"
      "#culprit{border:2px solid #b00;background:#fff5f5;padding:0.6em 1em;margin-bottom:1.5em}"
      "#culprit h2{margin:0 0 0.4em 0;color:#b00}.ok{border-color:#2a7;background:#f4fff8}"
      "#culprit.ok h2{color:#185}#culprit.drift{border-color:#c80;background:#fffaf0}"
      "#culprit.drift h2{color:#a60}"
      "</style></head><body><h1>portkit compare</h1>";
  PORTKIT_RETURN_IF_ERROR(AppendStateBox(report, h));
  for (const auto& line : CompareConclusion(report))
    if (line.rfind("First divergence", 0) != 0 && line.rfind("Precision drift", 0) != 0)
      h += "<p>" + Html(line) + "</p>";
  h += "<h2>Error along execution order (1 &minus; cosine of each operator output, log scale)</h2>";
  const int w = 1100, ht = 260, label_h = 150;
  h += "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" +
       std::to_string(ht + label_h) + "\">";
  h += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(ht) +
       "\" fill=\"#fafafa\" stroke=\"#ccc\"/>";
  for (int e = 0; e >= -12; e -= 3) {  // y axis: decades
    double y = ht - (e + 12.0) / 12.5 * ht;
    h += "<text x=\"4\" y=\"" + std::to_string(static_cast<int>(y) + 4) + "\" font-size=\"10\" fill=\"#888\">1e" +
         std::to_string(e) + "</text>";
  }
  std::string pts;
  // Operator names along the x axis: the culprit, the worst outputs and evenly spaced ones, as
  // many as fit (every label is also a tooltip on its point).
  std::vector<bool> labelled(series.size(), false);
  const size_t max_labels = 40;
  for (size_t k = 0; k < std::min(series.size(), max_labels / 2); ++k)
    labelled[series.size() <= max_labels / 2 ? k : k * (series.size() - 1) / (max_labels / 2 - 1)] = true;
  // The worst outputs, worst first (ties in execution order): labelled, and listed below the chart.
  std::vector<size_t> worst;
  {
    std::vector<size_t> order(series.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return series[a].err > series[b].err; });
    for (size_t k = 0; k < std::min<size_t>(order.size(), max_labels / 4); ++k) labelled[order[k]] = true;
    worst.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(order.size(), 15)));
  }
  std::vector<std::string> worst_names(worst.size());
  auto point = [&](size_t i, double& x, double& y) {
    double v = std::max(series[i].err, 1e-12);
    y = std::clamp(ht - (std::log10(v) + 12.0) / 12.5 * ht, 2.0, ht - 2.0);
    x = series.size() > 1 ? static_cast<double>(i) * (w - 40) / static_cast<double>(series.size() - 1) + 30 : w / 2.0;
  };
  // The line first, then the marks, handed to the sink in pieces as they are written (a chart of
  // 100k outputs is tens of megabytes).
  for (size_t i = 0; i < series.size(); ++i) {
    double x, y;
    point(i, x, y);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x, y);
    pts += buf;
  }
  h += "<polyline fill=\"none\" stroke=\"#4a7bd0\" stroke-width=\"1.2\" points=\"";
  PORTKIT_RETURN_IF_ERROR(FlushPiece(h, sink, true));
  PORTKIT_RETURN_IF_ERROR(FlushPiece(pts, sink, true));
  std::string().swap(pts);
  h += "\"/>";
  std::string& marks = h;
  size_t i = 0;
  PORTKIT_RETURN_IF_ERROR(report.ForEachRow([&](const accuracy::CompareRow& r) -> Status {
    if (!charted(r) || i >= series.size()) return Status::Ok();
    const std::string& name = name_of(r);
    for (size_t k = 0; k < worst.size(); ++k) {
      if (worst[k] != i) continue;
      const std::string& fwd = report.TargetForward(r);  // a backward output: where it comes from
      worst_names[k] = fwd.empty() ? name : name + " (backward of " + fwd + ")";
    }
    double x, y;
    point(i, x, y);
    char buf[64];
    const bool culprit = report.first_divergence_op >= 0 && series[i].op == report.first_divergence_op;
    std::string label = OpLabel(name);
    std::snprintf(buf, sizeof buf, "%.1f", x);
    std::string xs = buf;
    std::snprintf(buf, sizeof buf, "%.1f", y);
    std::string ys = buf;
    marks += "<circle cx=\"" + xs + "\" cy=\"" + ys + "\" r=\"" + (culprit ? "5" : "2") + "\" fill=\"" +
             (culprit ? "#b00" : "#4a7bd0") + "\"><title>" + Html(name) + ": 1 - cosine " +
             FormatNumber(series[i].err) + "</title></circle>";
    if (culprit) {
      marks += "<text class=\"culprit-label\" x=\"" + xs + "\" y=\"" + std::to_string(static_cast<int>(y) - 8) +
               "\" font-size=\"12\" fill=\"#b00\" text-anchor=\"middle\">culprit: " + Html(label) + "</text>";
    }
    if (labelled[i] || culprit) {
      marks += "<text class=\"op-label\" font-size=\"10\" fill=\"" + std::string(culprit ? "#b00" : "#333") +
               "\" transform=\"translate(" + xs + "," + std::to_string(ht + 6) + ") rotate(60)\">" + Html(label) +
               "</text>";
    }
    ++i;
    return FlushPiece(marks, sink);
  }));
  h += "</svg><p>" + std::to_string(series.size()) +
       " operator outputs, first to last; hover a point for its operator and error.</p>";
  h += "<h2>Worst outputs</h2><table><tr><th>output (target)</th><th>1 &minus; cosine</th></tr>";
  for (size_t k = 0; k < worst.size(); ++k)
    h += "<tr><td>" + Html(worst_names[k]) + "</td><td>" + FormatNumber(series[worst[k]].err) + "</td></tr>";
  h += "</table></body></html>\n";
  return FlushPiece(h, sink, true);
}

}  // namespace portkit::render
