#include "accuracy/compare.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "accuracy/metrics/metric.h"
#include "accuracy/safetensors.h"
#include "core/atomic_file.h"
#include "core/csv_writer.h"
#include "core/json_writer.h"
#include "core/table.h"

namespace portkit::accuracy {
namespace fs = std::filesystem;

std::vector<std::pair<long, long>> AlignOps(const std::vector<DumpOp>& t, const std::vector<DumpOp>& r) {
  auto key = [](const DumpOp& op) { return op.name + "|" + op.phase; };
  std::vector<std::pair<long, long>> out;
  bool same = t.size() == r.size();
  for (size_t i = 0; same && i < t.size(); ++i) same = key(t[i]) == key(r[i]);
  if (same) {
    for (size_t i = 0; i < t.size(); ++i) out.emplace_back(static_cast<long>(i), static_cast<long>(i));
    return out;
  }
  // LCS by dynamic programming on the op keys (bounded: huge dumps fall back to greedy matching).
  size_t n = t.size(), m = r.size();
  if (n * m > 50'000'000) {
    size_t j = 0;
    for (size_t i = 0; i < n && j < m; ++i) {
      size_t k = j;
      while (k < m && key(r[k]) != key(t[i])) ++k;
      if (k < m) out.emplace_back(static_cast<long>(i), static_cast<long>(k)), j = k + 1;
    }
    return out;
  }
  std::vector<std::string> a(n), b(m);
  for (size_t i = 0; i < n; ++i) a[i] = key(t[i]);
  for (size_t j = 0; j < m; ++j) b[j] = key(r[j]);
  std::vector<std::vector<uint32_t>> dp(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      dp[i][j] = a[i] == b[j] ? dp[i + 1][j + 1] + 1 : std::max(dp[i + 1][j], dp[i][j + 1]);
  for (size_t i = 0, j = 0; i < n && j < m;) {
    if (a[i] == b[j]) out.emplace_back(static_cast<long>(i), static_cast<long>(j)), ++i, ++j;
    else if (dp[i + 1][j] >= dp[i][j + 1]) ++i;
    else ++j;
  }
  return out;
}

namespace {

struct TensorStats {
  double max = -INFINITY, min = INFINITY, sum = 0, sq = 0;
  size_t count = 0;
  bool nonfinite = false;
  void Add(const double* v, size_t c) {
    for (size_t i = 0; i < c; ++i) {
      double x = v[i];
      if (!std::isfinite(x)) nonfinite = true;
      max = std::max(max, x), min = std::min(min, x), sum += x, sq += x * x;
    }
    count += c;
  }
  double mean() const { return count ? sum / static_cast<double>(count) : 0; }
  double norm() const { return std::sqrt(sq); }
};

std::string Num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

std::string Shape(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// Opened safetensors files, one per op file (only the last few stay open).
class Files {
 public:
  explicit Files(fs::path dir) : dir_(std::move(dir)) {}
  Expected<const SafetensorsFile*> Get(const std::string& name) {
    if (auto it = open_.find(name); it != open_.end()) return &it->second;
    if (open_.size() > 64) open_.clear();
    auto f = SafetensorsFile::Open(dir_ / name);
    if (!f.ok()) return f.status();
    return &open_.emplace(name, std::move(*f)).first->second;
  }

 private:
  fs::path dir_;
  std::map<std::string, SafetensorsFile> open_;
};

struct Row {
  std::vector<std::string> cells;
  std::string verdict;
  std::map<std::string, double> extra;
  long target_op = -1;
  bool output = false;
};

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

/// Self-contained HTML: 1 − cosine of every compared output along execution order (SVG), the worst
/// outputs, and the first divergence.
std::string ReportHtml(const std::vector<Row>& rows, const std::string& divergence) {
  std::vector<std::pair<std::string, double>> series;  // name, 1 - cosine
  for (const auto& r : rows) {
    if (!r.output || (r.verdict != "Yes" && r.verdict != "No")) continue;
    double cos = std::atof(r.cells[6].c_str());
    if (r.cells[6] == "nan") cos = -1;
    series.emplace_back(r.cells[0], 1.0 - cos);
  }
  std::string h = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>portkit compare</title><style>"
                  "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse}"
                  "td,th{border:1px solid #ccc;padding:3px 8px}.no{color:#b00}</style></head><body>"
                  "<h1>portkit compare</h1>";
  h += "<p><b>First divergence:</b> " + (divergence.empty() ? std::string("none") : Html(divergence)) + "</p>";
  h += "<h2>Error along execution order (1 &minus; cosine of each operator output, log scale)</h2>";
  const int w = 1000, ht = 260;
  h += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(ht + 20) + "\">";
  h += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(ht) + "\" fill=\"#fafafa\" stroke=\"#ccc\"/>";
  std::string pts;
  for (size_t i = 0; i < series.size(); ++i) {
    double v = std::max(series[i].second, 1e-12);
    double y = ht - (std::log10(v) + 12.0) / 12.5 * ht;  // 1e-12 .. ~3
    double x = series.size() > 1 ? static_cast<double>(i) * (w - 10) / static_cast<double>(series.size() - 1) + 5 : w / 2.0;
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
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3e", v);
    h += "<tr><td>" + Html(name) + "</td><td>" + buf + "</td></tr>";
  }
  return h + "</table></body></html>\n";
}

}  // namespace

int CompareMain(int argc, char** argv, Context& ctx) {
  std::string ref_dir, target_dir, out_dir;
  CLI::App app{"Compare an operator-level dump of a target run against a reference run (dumps written by "
               "portkit.torch.dumper).", "portkit compare"};
  app.add_option("reference", ref_dir, "the reference dump (e.g. fp32 on CPU/GPU)")->required();
  app.add_option("target", target_dir, "the target dump (e.g. bf16 on the accelerator)")->required();
  app.add_option("-o,--output", out_dir, "folder for compare_result.csv / .json")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  Logger& log = ctx.logger;
  auto ref = Dump::Load(ref_dir);
  auto tgt = Dump::Load(target_dir);
  if (!ref.ok() || !tgt.ok()) {
    log.Error(!ref.ok() ? ref.status().message() : tgt.status().message());
    return 2;
  }
  for (const auto* d : {&*ref, &*tgt})
    if (!d->warning.empty()) log.Warning(d->warning);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) {
    log.Error("cannot create " + out_dir + ": " + ec.message());
    return 2;
  }
  auto pairs = AlignOps(tgt->ops, ref->ops);
  log.Info("Matched " + std::to_string(pairs.size()) + " operators (target " + std::to_string(tgt->ops.size()) +
           ", reference " + std::to_string(ref->ops.size()) + ").");
  Files tfiles(tgt->dir), rfiles(ref->dir);
  std::vector<Row> rows;
  std::vector<double> nbuf(1 << 14), bbuf(1 << 14);
  auto label = [](const DumpOp& op, const std::string& key) {
    return op.name + "." + op.phase + "." + std::to_string(op.index) + "." + key;
  };
  std::vector<char> matched_t(tgt->ops.size(), 0), matched_r(ref->ops.size(), 0);
  for (auto [ti, ri] : pairs) {
    matched_t[static_cast<size_t>(ti)] = matched_r[static_cast<size_t>(ri)] = 1;
    const DumpOp& top = tgt->ops[static_cast<size_t>(ti)];
    const DumpOp& rop = ref->ops[static_cast<size_t>(ri)];
    for (const auto& tt : top.tensors) {
      Row row;
      row.target_op = ti;
      row.output = tt.key.rfind("output", 0) == 0;
      auto rit = std::find_if(rop.tensors.begin(), rop.tensors.end(), [&](const DumpTensor& x) { return x.key == tt.key; });
      std::string err;
      std::vector<std::string> metrics(6, "N/A"), tstats(4, "N/A"), rstats(4, "N/A");
      std::string verdict = "Unmatched";
      if (rit == rop.tensors.end()) {
        err = "no tensor " + tt.key + " in the reference op";
      } else if (rit->shape != tt.shape) {
        err = "shape mismatch";
      } else if (top.file.empty() || rop.file.empty()) {
        err = "stats-only dump: no tensor data";
        verdict = "N/A";
      } else {
        auto tf = tfiles.Get(top.file);
        auto rf = rfiles.Get(rop.file);
        if (!tf.ok() || !rf.ok()) {
          err = !tf.ok() ? tf.status().message() : rf.status().message();
        } else {
          const auto& tmap = (*tf)->tensors();
          const auto& rmap = (*rf)->tensors();
          auto ta = tmap.find(tt.key), ra = rmap.find(tt.key);
          if (ta == tmap.end() || ra == rmap.end() || ta->second.numel() != ra->second.numel()) {
            err = "tensor data missing or of another size";
          } else {
            DType tdt = ta->second.dtype;
            auto metric_set = MakeMetrics(tdt);
            TensorStats ts, rs;
            uint64_t total = ta->second.numel();
            size_t te = DTypeSize(tdt), re = DTypeSize(ra->second.dtype);
            for (uint64_t at = 0; at < total; at += nbuf.size()) {
              size_t c = static_cast<size_t>(std::min<uint64_t>(nbuf.size(), total - at));
              DecodeToDouble(tdt, (*tf)->Data(ta->second) + at * te, c, nbuf.data());
              DecodeToDouble(ra->second.dtype, (*rf)->Data(ra->second) + at * re, c, bbuf.data());
              for (auto& m : metric_set) m->Accumulate(nbuf.data(), bbuf.data(), c);
              ts.Add(nbuf.data(), c);
              rs.Add(bbuf.data(), c);
            }
            std::map<std::string, double> values;
            for (auto& m : metric_set) values[std::string(m->name())] = m->Finalize();
            const char* cols[] = {"Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                                  "Five Thousandths Err Ratio"};
            for (int i = 0; i < 6; ++i) metrics[static_cast<size_t>(i)] = Num(values[cols[i]]);
            for (const char* x : {"RMSE", "MeanAbsErr", "MeanRelErr", "KLDivergence", "MaxULPErr"}) row.extra[x] = values[x];
            tstats = {Num(ts.max), Num(ts.min), Num(ts.mean()), Num(ts.norm())};
            rstats = {Num(rs.max), Num(rs.min), Num(rs.mean()), Num(rs.norm())};
            double cos = values["Cosine"], mae = values["MaxAbsErr"];
            bool bad = std::isnan(cos) || std::isnan(mae) || std::isinf(mae) || ts.nonfinite || rs.nonfinite ||
                       (cos < 0.99 && mae > 0.001) || cos < 0.9 || mae > 1;
            verdict = bad ? "No" : "Yes";
            if (ts.nonfinite || rs.nonfinite) err = "inf or nan in the data";
          }
        }
      }
      row.verdict = verdict;
      row.cells = {label(top, tt.key), rit == rop.tensors.end() ? "N/A" : label(rop, rit->key), tt.dtype,
                   rit == rop.tensors.end() ? "N/A" : rit->dtype, Shape(tt.shape),
                   rit == rop.tensors.end() ? "N/A" : Shape(rit->shape)};
      row.cells.insert(row.cells.end(), metrics.begin(), metrics.end());
      row.cells.insert(row.cells.end(), tstats.begin(), tstats.end());
      row.cells.insert(row.cells.end(), rstats.begin(), rstats.end());
      row.cells.push_back(verdict);
      row.cells.push_back(err);
      rows.push_back(std::move(row));
    }
  }
  // Operators of one run with no counterpart in the other.
  auto unmatched = [&](const Dump& d, const std::vector<char>& seen, bool target) {
    for (size_t i = 0; i < d.ops.size(); ++i) {
      if (seen[i]) continue;
      Row row;
      std::string l = label(d.ops[i], "*");
      row.cells = {target ? l : "N/A", target ? "N/A" : l, "N/A", "N/A", "N/A", "N/A"};
      for (int k = 0; k < 14; ++k) row.cells.push_back("N/A");
      row.cells.push_back("Unmatched");
      row.cells.push_back(target ? "no matching operator in the reference" : "no matching operator in the target");
      row.verdict = "Unmatched";
      rows.push_back(std::move(row));
    }
  };
  unmatched(*tgt, matched_t, true);
  unmatched(*ref, matched_r, false);

  CsvWriter csv({"NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
                 "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                 "Five Thousandths Err Ratio", "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max",
                 "Bench min", "Bench mean", "Bench l2norm", "Accuracy Reached or Not", "Err_message"});
  std::map<std::string, size_t> verdicts;
  long first_divergence = -1;
  for (const auto& r : rows) {
    csv.AddRow(r.cells);
    ++verdicts[r.verdict];
    if (r.verdict == "No" && r.output && (first_divergence < 0 || r.target_op < first_divergence))
      first_divergence = r.target_op;
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("reference").String(ref_dir).Key("target").String(target_dir);
  j.Key("first_divergence");
  if (first_divergence >= 0) {
    const DumpOp& op = tgt->ops[static_cast<size_t>(first_divergence)];
    j.BeginObject().Key("index").Int(op.index).Key("name").String(op.name).Key("phase").String(op.phase)
        .Key("module").String(op.module).Key("stack").String(op.stack).EndObject();
  } else {
    j.Null();
  }
  j.Key("rows").BeginArray();
  for (const auto& r : rows) {
    j.BeginObject();
    j.Key("npu_name").String(r.cells[0]).Key("bench_name").String(r.cells[1]).Key("verdict").String(r.verdict);
    for (const auto& [k, v] : r.extra) j.Key(k).Double(v);
    j.Key("err_message").String(r.cells.back());
    j.EndObject();
  }
  j.EndArray().EndObject();
  std::string divergence;
  if (first_divergence >= 0) {
    const DumpOp& op = tgt->ops[static_cast<size_t>(first_divergence)];
    divergence = op.name + " (" + op.phase + ", #" + std::to_string(op.index) + (op.stack.empty() ? "" : ", " + op.stack) + ")";
  }
  Status st = WriteFileAtomic(fs::path(out_dir) / "compare_result.csv", csv.str());
  if (st.ok()) st = WriteFileAtomic(fs::path(out_dir) / "compare_result.json", j.str());
  if (st.ok()) st = WriteFileAtomic(fs::path(out_dir) / "compare_report.html", ReportHtml(rows, divergence));
  if (!st.ok()) {
    log.Error(st.message());
    return 1;
  }
  if (!divergence.empty()) {
    log.Info("First divergence: " + divergence);
  } else {
    log.Info("No diverging operator output.");
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& [v, n] : verdicts) table.push_back({v, std::to_string(n)});
  std::string t = RenderTable({"Accuracy Reached or Not", "tensors"}, table);
  std::fwrite(t.data(), 1, t.size(), stdout);
  return 0;
}

}  // namespace portkit::accuracy
