#include "render/prof_cluster.h"

#include <cstdio>

#include "core/csv_writer.h"
#include "core/json_writer.h"
#include "core/table.h"

namespace portkit::render {
namespace {

using namespace prof::cluster;

/// ns -> "12.345" µs, exactly.
std::string Us(int64_t ns) {
  std::string sign = ns < 0 ? "-" : "";
  uint64_t v = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  std::string frac = std::to_string(v % 1000);
  return sign + std::to_string(v / 1000) + "." + std::string(3 - frac.size(), '0') + frac;
}
/// ns -> "12.345 ms" / "45.600 us".
std::string Dur(int64_t ns) {
  char buf[64];
  if (ns >= 1'000'000 || ns <= -1'000'000) std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  else std::snprintf(buf, sizeof buf, "%.3f us", static_cast<double>(ns) / 1e3);
  return buf;
}
std::string Pct(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%",
                whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}
std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
/// Overlapped / communication (HTA's comp_comm_overlap_ratio); 0 without communication.
double OverlapRatio(const TimeSplit& s) {
  return s.communication > 0 ? static_cast<double>(s.overlapped) / static_cast<double>(s.communication) : 0.0;
}
/// Microseconds as a JSON number (exact decimal text).
void UsNumber(JsonWriter& w, int64_t ns) { w.Fixed(static_cast<double>(ns) / 1000.0, 3); }

void SplitJson(JsonWriter& w, const TimeSplit& s) {
  w.BeginObject();
  w.Key("window_us"), UsNumber(w, s.window);
  w.Key("busy_us"), UsNumber(w, s.busy);
  w.Key("idle_us"), UsNumber(w, s.idle());
  w.Key("compute_us"), UsNumber(w, s.compute);
  w.Key("non_compute_us"), UsNumber(w, s.non_compute());
  w.Key("communication_us"), UsNumber(w, s.communication);
  w.Key("memory_us"), UsNumber(w, s.memory);
  w.Key("overlapped_us"), UsNumber(w, s.overlapped);
  w.Key("exposed_communication_us"), UsNumber(w, s.exposed_communication());
  w.Key("free_us"), UsNumber(w, s.free());
  w.Key("comm_comp_overlap_ratio"), w.Fixed(OverlapRatio(s), 6);
  w.EndObject();
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<std::vector<std::string>> BreakdownRows(const ClusterReport& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& b : r.breakdown) {
    const TimeSplit& s = b.total;
    rows.push_back({std::to_string(b.rank), Dur(s.window), Dur(s.idle()) + " (" + Pct(s.idle(), s.window) + ")",
                    Dur(s.compute) + " (" + Pct(s.compute, s.window) + ")",
                    Dur(s.non_compute()) + " (" + Pct(s.non_compute(), s.window) + ")", Dur(s.communication),
                    Dur(s.exposed_communication()), Pct(s.overlapped, s.communication)});
  }
  return rows;
}
const std::vector<std::string> kBreakdownHeader = {"rank",        "device span",   "idle",         "compute",
                                                   "non-compute", "communication", "exposed comm", "comm overlapped"};

std::vector<std::vector<std::string>> SlowRows(const ClusterReport& r, bool only_slow) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : r.slow_ranks) {
    if (only_slow && !c.slow) continue;
    rows.push_back({std::to_string(c.step), c.quantity, Dur(c.min), Dur(c.max), Dur(static_cast<int64_t>(c.mean)),
                    Fixed(c.ratio, 4), c.slow ? "yes" : "no", c.suspect >= 0 ? std::to_string(c.suspect) : ""});
  }
  return rows;
}
const std::vector<std::string> kSlowHeader = {"step", "quantity",       "min",  "max",
                                              "mean", "(max-min)/mean", "slow", "rank to look at"};

}  // namespace

std::string ProfClusterText(const ClusterReport& r) {
  std::string out;
  out += "Cluster of " + std::to_string(r.ranks.size()) + " rank(s) in " + r.dir.string() + "\n\n";
  std::vector<std::vector<std::string>> ranks;
  for (const auto& s : r.ranks)
    ranks.push_back({std::to_string(s.rank), s.file, s.backend.empty() ? "-" : s.backend,
                     s.world_size >= 0 ? std::to_string(s.world_size) : "-", "+" + Dur(s.offset_ns),
                     std::to_string(s.device_tasks), std::to_string(s.comm_tasks)});
  out += RenderTable({"rank", "file", "backend", "world size", "starts at", "device tasks", "comm tasks"}, ranks);
  for (const auto& s : r.ranks)
    if (!s.warning.empty()) out += "note: rank " + std::to_string(s.rank) + ": " + s.warning + "\n";
  for (const auto& [file, why] : r.skipped)
    if (why.rfind("not read: ", 0) == 0) out += "note: skipped " + file + ": " + why + "\n";
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  out += "\nTemporal breakdown per rank (HTA's definitions):\n";
  out += RenderTable(kBreakdownHeader, BreakdownRows(r));
  size_t slow = 0;
  for (const auto& c : r.slow_ranks) slow += c.slow;
  out += "\nSlow ranks (msprof-analyze: (max-min)/mean > 0.05 per step of compute, communication or free time): ";
  if (r.ranks.size() < 2) out += "needs 2 or more ranks\n";
  else if (r.slow_ranks.empty()) out += "no step common to all ranks\n";
  else if (!slow) out += "none in " + std::to_string(r.slow_ranks.size() / 3) + " step(s)\n";
  else
    out += std::to_string(slow) + " of " + std::to_string(r.slow_ranks.size()) + " checks\n" +
           RenderTable(kSlowHeader, SlowRows(r, true));
  const auto& comm = r.communication;
  out += "\nCommunication: " + std::to_string(comm.collectives.size()) + " collective(s) matched across ranks, " +
         std::to_string(comm.matrix.size()) + " link(s), " + std::to_string(comm.slow_links) + " slow link(s)\n";
  if (!comm.matrix.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& l : comm.matrix)
      rows.push_back({l.op, std::to_string(l.src) + "->" + std::to_string(l.dst), l.point_to_point ? "p2p" : "ring",
                      std::to_string(l.count), l.bytes > 0 ? std::to_string(l.bytes) : "-", Dur(l.transit),
                      l.bandwidth_gbps >= 0 ? Fixed(l.bandwidth_gbps, 3) : "-", l.slow ? "SLOW" : ""});
    out += RenderTable({"op", "link", "kind", "count", "bytes", "transit", "GB/s", ""}, rows);
  }
  return out;
}

std::string ProfClusterJson(const ClusterReport& r) {
  JsonWriter w;
  w.BeginObject();
  w.Key("origin_ns").Int(r.origin_ns);
  w.Key("ranks").BeginArray();
  for (const auto& s : r.ranks) {
    w.BeginObject();
    w.Key("rank").Int(s.rank);
    w.Key("file").String(s.file);
    w.Key("backend").String(s.backend);
    w.Key("world_size").Int(s.world_size);
    w.Key("rank_from_file_name").Bool(s.rank_source == RankSource::kFileName);
    w.Key("rank_assumed").Bool(s.rank_source == RankSource::kAssumedZero);
    w.Key("offset_us"), UsNumber(w, s.offset_ns);
    w.Key("events").Int(static_cast<int64_t>(s.events));
    w.Key("device_tasks").Int(static_cast<int64_t>(s.device_tasks));
    w.Key("communication_tasks").Int(static_cast<int64_t>(s.comm_tasks));
    w.Key("warning").String(s.warning);
    w.EndObject();
  }
  w.EndArray();
  w.Key("temporal_breakdown").BeginArray();
  for (const auto& b : r.breakdown) {
    w.BeginObject();
    w.Key("rank").Int(b.rank);
    w.Key("total"), SplitJson(w, b.total);
    w.Key("steps").BeginArray();
    for (const auto& s : b.steps) {
      w.BeginObject();
      w.Key("step").Int(s.step);
      w.Key("start_us"), UsNumber(w, s.start - r.origin_ns);
      w.Key("end_us"), UsNumber(w, s.end - r.origin_ns);
      w.Key("preparing_us"), UsNumber(w, s.preparing);
      w.Key("split"), SplitJson(w, s.split);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("slow_rank_checks").BeginArray();
  for (const auto& c : r.slow_ranks) {
    w.BeginObject();
    w.Key("step").Int(c.step);
    w.Key("quantity").String(c.quantity);
    w.Key("min_us"), UsNumber(w, c.min);
    w.Key("max_us"), UsNumber(w, c.max);
    w.Key("mean_us").Fixed(c.mean / 1000.0, 3);
    w.Key("ratio").Fixed(c.ratio, 6);
    w.Key("slow").Bool(c.slow);
    if (c.suspect >= 0) w.Key("rank").Int(c.suspect);
    else w.Key("rank").Null();
    w.EndObject();
  }
  w.EndArray();
  w.Key("collectives").Int(static_cast<int64_t>(r.communication.collectives.size()));
  w.Key("links").Int(static_cast<int64_t>(r.communication.matrix.size()));
  w.Key("slow_links").Int(static_cast<int64_t>(r.communication.slow_links));
  w.Key("notes").BeginArray();
  for (const auto& n : r.notes) w.String(n);
  w.EndArray();
  w.Key("skipped").BeginArray();
  for (const auto& [file, why] : r.skipped) {
    w.BeginObject();
    w.Key("file").String(file);
    w.Key("why").String(why);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.str() + "\n";
}

std::string ClusterStepTraceCsv(const ClusterReport& r) {
  CsvWriter csv({"Step", "Type", "Index", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
                 "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing", "Memory",
                 "Idle"});
  for (const auto& row : r.step_trace) {
    const TimeSplit& s = row.split;
    csv.AddRow({std::to_string(row.step), "rank", std::to_string(row.rank), Us(s.compute),
                Us(s.exposed_communication()), Us(s.overlapped), Us(s.communication), Us(s.free()),
                Us(s.window - s.receive), Us(s.receive), Us(s.exposed_communication() - s.receive_exposed),
                Us(row.preparing), Us(s.memory), Us(s.idle())});
  }
  return csv.str();
}

std::string ClusterCommunicationJson(const ClusterReport& r) {
  JsonWriter w;
  w.BeginArray();
  for (const auto& c : r.communication.collectives) {
    w.BeginObject();
    w.Key("op").String(c.op);
    w.Key("group").String(c.group);
    w.Key("index").Int(c.index);
    w.Key("kernel").String(c.kernel);
    w.Key("step").Int(c.step);
    w.Key("duration_us"), UsNumber(w, c.Duration());
    w.Key("ranks").BeginArray();
    for (const auto& x : c.ranks) {
      w.BeginObject();
      w.Key("rank").Int(x.rank);
      w.Key("start_us"), UsNumber(w, x.start - r.origin_ns);
      w.Key("elapse_us"), UsNumber(w, x.end - x.start);
      w.Key("wait_us"), UsNumber(w, x.wait);
      w.Key("transit_us"), UsNumber(w, x.transit);
      w.Key("bytes").Int(x.bytes);
      if (x.bandwidth_gbps >= 0) w.Key("bandwidth_gbps").Fixed(x.bandwidth_gbps, 6);
      else w.Key("bandwidth_gbps").Null();
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  return w.str() + "\n";
}

std::string ClusterCommunicationMatrixJson(const ClusterReport& r) {
  JsonWriter w;
  w.BeginObject();
  std::string op;
  bool open = false;
  for (const auto& l : r.communication.matrix) {  // sorted by op, src, dst
    if (!open || l.op != op) {
      if (open) w.EndObject();
      op = l.op;
      w.Key(op).BeginObject();
      open = true;
    }
    w.Key(std::to_string(l.src) + "-" + std::to_string(l.dst)).BeginObject();
    w.Key("Link Type").String(l.point_to_point ? "p2p" : "ring neighbour");
    w.Key("Count").Int(l.count);
    w.Key("Transit Time(ms)").Fixed(static_cast<double>(l.transit) / 1e6, 6);
    w.Key("Transit Size(MB)").Fixed(static_cast<double>(l.bytes) / 1e6, 6);
    if (l.bandwidth_gbps >= 0) w.Key("Bandwidth(GB/s)").Fixed(l.bandwidth_gbps, 6);
    else w.Key("Bandwidth(GB/s)").Null();
    w.Key("Slow").Bool(l.slow);
    w.EndObject();
  }
  if (open) w.EndObject();
  w.EndObject();
  return w.str() + "\n";
}

std::string ProfClusterHtml(const ClusterReport& r) {
  std::string h =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>portkit prof cluster</title>"
      "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}"
      ".slow{background:#fdd}.bar{display:flex;height:14px;width:480px}</style></head><body>\n";
  h += "<h1>Cluster of " + std::to_string(r.ranks.size()) + " rank(s)</h1>\n";
  auto table = [&](const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                   const std::vector<bool>& slow = {}) {
    h += "<table><tr>";
    for (const auto& c : header) h += "<th>" + HtmlEscape(c) + "</th>";
    h += "</tr>\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      h += i < slow.size() && slow[i] ? "<tr class=\"slow\">" : "<tr>";
      for (const auto& c : rows[i]) h += "<td>" + HtmlEscape(c) + "</td>";
      h += "</tr>\n";
    }
    h += "</table>\n";
  };
  h += "<h2>Temporal breakdown (HTA's definitions)</h2>\n";
  table(kBreakdownHeader, BreakdownRows(r));
  // One bar per rank: compute / other busy / idle, as shares of its device span.
  for (const auto& b : r.breakdown) {
    const TimeSplit& s = b.total;
    auto width = [&](int64_t part) {
      return Fixed(s.window ? 100.0 * static_cast<double>(part) / static_cast<double>(s.window) : 0.0, 2);
    };
    h += "<div>rank " + std::to_string(b.rank) + "<div class=\"bar\"><div style=\"width:" + width(s.compute) +
         "%;background:#4a8\" title=\"compute\"></div><div style=\"width:" + width(s.non_compute()) +
         "%;background:#e94\" title=\"non-compute\"></div><div style=\"width:" + width(s.idle()) +
         "%;background:#ccc\" title=\"idle\"></div></div></div>\n";
  }
  h += "<h2>Slow ranks (msprof-analyze's rule)</h2>\n";
  std::vector<bool> slow;
  for (const auto& c : r.slow_ranks) slow.push_back(c.slow);
  table(kSlowHeader, SlowRows(r, false), slow);
  h += "<h2>Step trace</h2>\n";
  std::vector<std::vector<std::string>> steps;
  for (const auto& row : r.step_trace)
    steps.push_back({std::to_string(row.step), std::to_string(row.rank), Dur(row.split.window), Dur(row.split.compute),
                     Dur(row.split.communication), Dur(row.split.exposed_communication()), Dur(row.split.free())});
  table({"step", "rank", "window", "computing", "communication", "not overlapped", "free"}, steps);
  h += "<h2>Communication matrix</h2>\n";
  std::vector<std::vector<std::string>> links;
  std::vector<bool> slow_links;
  for (const auto& l : r.communication.matrix) {
    links.push_back({l.op, std::to_string(l.src) + "->" + std::to_string(l.dst), l.point_to_point ? "p2p" : "ring",
                     std::to_string(l.count), l.bytes > 0 ? std::to_string(l.bytes) : "-", Dur(l.transit),
                     l.bandwidth_gbps >= 0 ? Fixed(l.bandwidth_gbps, 3) : "-"});
    slow_links.push_back(l.slow);
  }
  table({"op", "link", "kind", "count", "bytes", "transit", "GB/s"}, links, slow_links);
  h += "</body></html>\n";
  return h;
}

}  // namespace portkit::render
