#include "accuracy/compare.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "accuracy/api.h"
#include "accuracy/metrics/metric.h"
#include "accuracy/metrics/simd.h"
#include "accuracy/safetensors.h"
#include "core/table.h"
#include "core/thread_pool.h"
#include "core/input_files.h"

namespace portkit::accuracy {
namespace fs = std::filesystem;

namespace {

/// Exact LCS of a[ai, ai+n) and b[bj, bj+m) by dynamic programming over integer key ids; the pairs
/// are appended to `out` in order. Memory n·m·4 bytes: callers keep n·m bounded.
void LcsByDp(const std::vector<int>& a, size_t ai, size_t n, const std::vector<int>& b, size_t bj, size_t m,
             std::vector<std::pair<long, long>>& out) {
  std::vector<uint32_t> dp((n + 1) * (m + 1), 0);
  auto at = [&](size_t i, size_t j) -> uint32_t& { return dp[i * (m + 1) + j]; };
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      at(i, j) = a[ai + i] == b[bj + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
  for (size_t i = 0, j = 0; i < n && j < m;) {
    if (a[ai + i] == b[bj + j]) {
      out.emplace_back(static_cast<long>(ai + i), static_cast<long>(bj + j)), ++i, ++j;
    } else if (at(i + 1, j) >= at(i, j + 1)) {
      ++i;
    } else {
      ++j;
    }
  }
}

}  // namespace

std::vector<std::pair<long, long>> AlignKeys(const std::vector<std::string>& ka, const std::vector<std::string>& kb) {
  std::vector<std::pair<long, long>> out;
  // Keys as small integers: comparisons in the quadratic part are then one instruction.
  std::map<std::string, int> ids;
  std::vector<int> a, b;
  for (const auto& k : ka) a.push_back(ids.emplace(k, static_cast<int>(ids.size())).first->second);
  for (const auto& k : kb) b.push_back(ids.emplace(k, static_cast<int>(ids.size())).first->second);
  size_t n = a.size(), m = b.size();
  // The common prefix and suffix pair 1:1 (exact for any LCS).
  size_t pre = 0;
  while (pre < n && pre < m && a[pre] == b[pre]) ++pre;
  size_t suf = 0;
  while (suf < n - pre && suf < m - pre && a[n - 1 - suf] == b[m - 1 - suf]) ++suf;
  for (size_t i = 0; i < pre; ++i) out.emplace_back(static_cast<long>(i), static_cast<long>(i));
  size_t rn = n - pre - suf, rm = m - pre - suf;
  constexpr size_t kExactCells = 50'000'000;  // 200 MB of DP table at most
  if (rn * rm <= kExactCells) {
    LcsByDp(a, pre, rn, b, pre, rm, out);
  } else {
    // Too large for one table: exact LCS in sliding windows of kWindow operators per side, keeping
    // the pairs of each window's first half (the alignment rarely strays further than a window
    // from the diagonal: runs differ by inserted casts or fused ops, not by whole layers).
    constexpr size_t kWindow = 4096;
    size_t i0 = pre, j0 = pre, iend = n - suf, jend = m - suf;
    std::vector<std::pair<long, long>> window;
    while (i0 < iend && j0 < jend) {
      size_t wn = std::min(kWindow, iend - i0), wm = std::min(kWindow, jend - j0);
      window.clear();
      LcsByDp(a, i0, wn, b, j0, wm, window);
      bool last = wn == iend - i0 && wm == jend - j0;
      size_t keep_i = last ? iend : i0 + wn / 2, keep_j = last ? jend : j0 + wm / 2;
      size_t kept = 0;
      for (const auto& [i, j] : window) {
        if (static_cast<size_t>(i) >= keep_i || static_cast<size_t>(j) >= keep_j) break;
        out.emplace_back(i, j), ++kept;
      }
      if (last) break;
      if (kept > 0) {
        i0 = static_cast<size_t>(out.back().first) + 1, j0 = static_cast<size_t>(out.back().second) + 1;
      } else {
        i0 += wn / 2, j0 += wm / 2;  // nothing in common near here: move on
      }
    }
  }
  for (size_t k = suf; k-- > 0;) out.emplace_back(static_cast<long>(n - 1 - k), static_cast<long>(m - 1 - k));
  return out;
}

namespace {

struct TensorStats {
  double max = -INFINITY, min = INFINITY, sum = 0, sq = 0;
  size_t count = 0;
  bool nonfinite = false;
  void Merge(const TensorStats& o) {
    max = std::max(max, o.max), min = std::min(min, o.min), sum += o.sum, sq += o.sq, count += o.count;
    nonfinite = nonfinite || o.nonfinite;
  }
  /// Adds c values; `avx2` picks the four-lane loop (same results up to summation order).
  void Add(const double* v, size_t c, bool avx2) {
    // A nan is kept out of max/min by the comparisons (the row then says "inf or nan in the
    // data"); any nan or inf makes the chunk's sum non-finite.
    double chunk_sum = 0, chunk_sq = 0;
#ifdef PORTKIT_ACCURACY_AVX2
    if (avx2) {
      AddAvx2(v, c, max, min, chunk_sum, chunk_sq);
    } else {
      AddScalar(v, c, max, min, chunk_sum, chunk_sq);
    }
#else
    (void)avx2;
    AddScalar(v, c, max, min, chunk_sum, chunk_sq);
#endif
    sum += chunk_sum;
    sq += chunk_sq;
    if (!nonfinite && !std::isfinite(chunk_sum))  // rare: confirm (huge finite values can overflow a sum)
      nonfinite = std::any_of(v, v + c, [](double x) { return !std::isfinite(x); });
    count += c;
  }

  /// One pass, two lanes of each statistic.
  static inline __attribute__((always_inline)) void AddScalar(const double* v, size_t c, double& max, double& min,
                                                              double& sum, double& sq) {
    double mx0 = max, mx1 = max, mn0 = min, mn1 = min, s0 = 0, s1 = 0, q0 = 0, q1 = 0;
    size_t i = 0;
    for (; i + 2 <= c; i += 2) {
      double a = v[i], b = v[i + 1];
      mx0 = a > mx0 ? a : mx0, mx1 = b > mx1 ? b : mx1;
      mn0 = a < mn0 ? a : mn0, mn1 = b < mn1 ? b : mn1;
      s0 += a, s1 += b, q0 += a * a, q1 += b * b;
    }
    if (i < c) {
      double a = v[i];
      mx0 = a > mx0 ? a : mx0, mn0 = a < mn0 ? a : mn0, s0 += a, q0 += a * a;
    }
    max = mx0 > mx1 ? mx0 : mx1;
    min = mn0 < mn1 ? mn0 : mn1;
    sum += s0 + s1;
    sq += q0 + q1;
  }

#ifdef PORTKIT_ACCURACY_AVX2
  PORTKIT_AVX2_FN static void AddAvx2(const double* v, size_t c, double& max, double& min, double& sum,
                                      double& sq) {
    using namespace simd;
    V4d mx = V4d{} + max, mn = V4d{} + min, s{}, q{};
    size_t i = 0;
    for (; i + 4 <= c; i += 4) {
      V4d x = Load(v + i);
      mx = Select(x > mx, x, mx);
      mn = Select(x < mn, x, mn);
      s += x;
      q += x * x;
    }
    max = std::max(std::max(mx[0], mx[1]), std::max(mx[2], mx[3]));
    min = std::min(std::min(mn[0], mn[1]), std::min(mn[2], mn[3]));
    sum = Sum(s);
    sq = Sum(q);
    AddScalar(v + i, c - i, max, min, sum, sq);  // inlined: no jump into SSE code with dirty upper halves
  }
#endif
  double mean() const { return count ? sum / static_cast<double>(count) : 0; }
  double norm() const { return std::sqrt(sq); }
};

/// Fills a compared row's metrics, statistics and verdict. Floating types: No when Cosine < 0.99
/// and MaxAbsErr > 0.001, Cosine < 0.9, MaxAbsErr > 1, or nan/inf. Integer and bool tensors must
/// match exactly.
void FinishRow(const MetricSet& metric_set, const TensorStats& ts, const TensorStats& rs, bool differing_nonfinite,
               DType tdtype, CompareRow& row) {
  row.metrics = metric_set.Results();
  row.compared = true;
  if (ts.count > 0) {  // an empty tensor has no statistics
    row.target.stats = TensorStatistics{ts.max, ts.min, ts.mean(), ts.norm()};
    row.reference.stats = TensorStatistics{rs.max, rs.min, rs.mean(), rs.norm()};
  }
  double cos = row.metrics["Cosine"], mae = row.metrics["MaxAbsErr"];
  bool bad;
  if (!IsFloating(tdtype)) {
    bad = mae != 0;
    if (bad) row.message = "integer data differ";
  } else {
    bad = std::isnan(cos) || std::isnan(mae) || std::isinf(mae) || differing_nonfinite ||
          (cos < 0.99 && mae > 0.001) || cos < 0.9 || mae > 1;
  }
  row.verdict = bad ? Verdict::kNo : Verdict::kYes;
  if (differing_nonfinite) row.message = "inf or nan in the data";
}

/// The first operator whose *own* error crosses the threshold, and on what that is judged.
struct Divergence {
  long first_local = -1;     ///< target op position
  long first_mismatch = -1;  ///< the earliest op with any output judged No
  std::string basis;         ///< "replay", "inputs matched", "outputs only" or "" (none)
};

/// Per target op in execution order: with replayed outputs, the op is local when a replayed
/// output is No (its inputs were the reference's); otherwise when an output is No while every
/// compared input is Yes; an op with no compared inputs is judged by its outputs alone.
Divergence FindDivergence(const std::vector<CompareRow>& rows) {
  struct OpVerdicts {
    bool replayed = false, replay_bad = false, output_bad = false, inputs_seen = false, inputs_ok = true;
  };
  std::map<long, OpVerdicts> by_op;
  for (const auto& r : rows) {
    if (r.target_op < 0 || (r.verdict != Verdict::kYes && r.verdict != Verdict::kNo)) continue;
    OpVerdicts& v = by_op[r.target_op];
    bool bad = r.verdict == Verdict::kNo;
    if (r.replay) v.replayed = true, v.replay_bad = v.replay_bad || bad;
    else if (r.output) v.output_bad = v.output_bad || bad;
    else v.inputs_seen = true, v.inputs_ok = v.inputs_ok && !bad;
  }
  Divergence d;
  for (const auto& [index, v] : by_op) {  // std::map: execution order of the target
    if (v.output_bad && d.first_mismatch < 0) d.first_mismatch = index;
    if (d.first_local >= 0) continue;
    if (v.replayed) {
      if (v.replay_bad) d.first_local = index, d.basis = "replay";
    } else if (v.output_bad && v.inputs_seen && v.inputs_ok) {
      d.first_local = index, d.basis = "inputs matched";
    } else if (v.output_bad && !v.inputs_seen) {
      d.first_local = index, d.basis = "outputs only";
    }
  }
  return d;
}

CompareOp OpOf(const DumpOp& op) { return {op.index, op.name, op.phase, op.module, op.stack}; }

std::string Shape(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

namespace {

/// One tensor comparison whose metrics still have to be computed.
struct PendingPair {
  size_t row = 0;
  std::filesystem::path tfile, rfile;
  std::string tkey, rkey;
  DType tdtype = DType::kUnknown, rdtype = DType::kUnknown;
  uint64_t numel = 0;
};

/// Metrics and statistics of one element range of a pending pair.
struct Partial {
  std::unique_ptr<MetricSet> metrics;
  TensorStats ts, rs;
  uint64_t identical_nonfinite = 0;  ///< positions holding the same inf (or nan on both sides)
  bool differing_nonfinite = false;  ///< an inf/nan that the other run does not have there
  std::string error;
};

/// Positions where both runs hold the same inf, or both nan (attention masks, padded logits), are
/// agreement, not error: they are set to 0 on both sides before the metrics and counted. Returns
/// whether a non-finite value is left that the other run does not share.
bool MaskIdenticalNonFinite(double* n, double* b, size_t c, uint64_t& masked) {
  bool left = false;
  for (size_t i = 0; i < c; ++i) {
    if (std::isfinite(n[i]) && std::isfinite(b[i])) continue;
    if (n[i] == b[i] || (std::isnan(n[i]) && std::isnan(b[i]))) {
      n[i] = b[i] = 0, ++masked;
    } else {
      left = true;
    }
  }
  return left;
}

/// Opened safetensors files of one worker (only the last few stay mapped).
class FileCache {
 public:
  Expected<const SafetensorsFile*> Get(const fs::path& path) {
    if (auto it = open_.find(path); it != open_.end()) return &it->second;
    if (open_.size() > 16) open_.clear();
    auto f = SafetensorsFile::Open(path);
    if (!f.ok()) return f.status();
    return &open_.emplace(path, std::move(*f)).first->second;
  }

 private:
  std::map<fs::path, SafetensorsFile> open_;
};

constexpr uint64_t kRangeElements = uint64_t{1} << 22;  // a unit of parallel work (16 MB of fp32)

void ComputeRange(const PendingPair& p, uint64_t begin, uint64_t end, FileCache& tcache, FileCache& rcache,
                  std::vector<double>& nbuf, std::vector<double>& bbuf, bool avx2, Partial& out) {
  auto tf = tcache.Get(p.tfile);
  auto rf = rcache.Get(p.rfile);
  if (!tf.ok() || !rf.ok()) {
    out.error = !tf.ok() ? tf.status().message() : rf.status().message();
    return;
  }
  const TensorInfo& ta = (*tf)->tensors().at(p.tkey);
  const TensorInfo& ra = (*rf)->tensors().at(p.rkey);
  out.metrics = std::make_unique<MetricSet>(p.tdtype);
  size_t te = DTypeSize(p.tdtype), re = DTypeSize(p.rdtype);
  for (uint64_t at = begin; at < end; at += nbuf.size()) {
    size_t c = static_cast<size_t>(std::min<uint64_t>(nbuf.size(), end - at));
    DecodeToDouble(p.tdtype, (*tf)->Data(ta) + at * te, c, nbuf.data());
    DecodeToDouble(p.rdtype, (*rf)->Data(ra) + at * re, c, bbuf.data());
    out.ts.Add(nbuf.data(), c, avx2);  // the statistics describe the data as it is
    out.rs.Add(bbuf.data(), c, avx2);
    if (out.ts.nonfinite || out.rs.nonfinite)
      out.differing_nonfinite |= MaskIdenticalNonFinite(nbuf.data(), bbuf.data(), c, out.identical_nonfinite);
    out.metrics->Accumulate(nbuf.data(), bbuf.data(), c);
  }
  (*tf)->Release(ta, begin, end - begin);  // memory stays flat however large the dumps are
  (*rf)->Release(ra, begin, end - begin);
}

bool IsOutputKey(const std::string& key) { return key.rfind("output", 0) == 0; }
bool IsReplayKey(const std::string& key) { return key.rfind("replay.", 0) == 0; }

/// `target,reference` operator names, one pair a line (`#` comments; a header line naming the
/// columns is allowed).
Expected<std::map<std::string, std::string>> LoadMapping(const fs::path& file) {
  const std::string path = file.string();
  if (auto probe = OpenInputFile(file); !probe.ok()) return probe.status();  // never block on a FIFO
  std::ifstream in(file);
  if (!in) return NotFound(path + ": cannot open the mapping file");
  std::map<std::string, std::string> out;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    auto comma = line.find(',');
    if (comma == std::string::npos)
      return ParseError(path + ":" + std::to_string(line_no) + ": expected `target_op,reference_op`");
    std::string t = line.substr(0, comma), r = line.substr(comma + 1);
    if (line_no == 1 && t == "target" && r == "reference") continue;
    if (t.empty() || r.empty())
      return ParseError(path + ":" + std::to_string(line_no) + ": empty operator name");
    out[t] = r;
  }
  return out;
}

/// A pair without tensor data (stats_only dumps): the statistics from the manifests, verdict N/A,
/// and whether the checksums of the exact bytes agree.
void StatsOnlyRow(const DumpTensor& t, const DumpTensor& r, CompareRow& row) {
  row.verdict = Verdict::kNotApplicable;
  if (t.has_stats && r.has_stats) {
    row.target.stats = TensorStatistics{t.max, t.min, t.mean, t.norm};
    row.reference.stats = TensorStatistics{r.max, r.min, r.mean, r.norm};
  }
  row.message = "stats-only dump: no tensor data";
  if (t.crc32 >= 0 && r.crc32 >= 0)
    row.message += t.crc32 == r.crc32 && t.dtype == r.dtype ? " (checksums equal: identical bytes)" : " (checksums differ)";
}

}  // namespace

std::string OpMatchKey(const DumpOp& op, bool with_shapes, const std::string* name) {
  std::string k = (name ? *name : op.name) + "|" + op.phase;
  if (!with_shapes) return k;
  for (const auto& t : op.tensors)
    if (IsOutputKey(t.key)) k += "|" + Shape(t.shape);
  return k;
}

std::string_view MatchKeyName(MatchKey key) { return key == MatchKey::kName ? "name" : "name+shape"; }

std::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kYes:
      return "Yes";
    case Verdict::kNo:
      return "No";
    case Verdict::kNotApplicable:
      return "N/A";
    case Verdict::kUnmatched:
      return "Unmatched";
  }
  return "Unmatched";
}

bool CompareReport::HasMismatch() const {
  auto it = verdict_counts.find(std::string(VerdictName(Verdict::kNo)));
  return it != verdict_counts.end() && it->second > 0;
}

Expected<CompareReport> RunCompare(const CompareOptions& options, Context& ctx) {
  Logger& log = ctx.logger;
  auto ref = Dump::Load(options.reference);
  if (!ref.ok()) return ref.status();
  auto tgt = Dump::Load(options.target);
  if (!tgt.ok()) return tgt.status();
  CompareReport report;
  report.reference = options.reference.string();
  report.target = options.target.string();
  report.match = options.match;
  for (const auto* d : {&*ref, &*tgt})
    if (!d->warning.empty()) report.warnings.push_back(d->warning);
  std::map<std::string, std::string> mapping;
  if (!options.mapping.empty()) {
    auto m = LoadMapping(options.mapping);
    if (!m.ok()) return m.status();
    mapping = std::move(*m);
  }
  // Matching: target names renamed through the mapping, then aligned on the chosen key.
  bool with_shapes = options.match == MatchKey::kNameAndShape;
  std::vector<std::string> tkeys, rkeys;
  for (const auto& op : tgt->ops) {
    auto it = mapping.find(op.name);
    tkeys.push_back(OpMatchKey(op, with_shapes, it != mapping.end() ? &it->second : nullptr));
  }
  for (const auto& op : ref->ops) rkeys.push_back(OpMatchKey(op, with_shapes));
  auto pairs = AlignKeys(tkeys, rkeys);
  report.target_ops = tgt->ops.size();
  report.reference_ops = ref->ops.size();
  report.matched_ops = pairs.size();
  report.renames = mapping.size();
  log.Info("Matched " + std::to_string(pairs.size()) + " operators (target " + std::to_string(tgt->ops.size()) +
           ", reference " + std::to_string(ref->ops.size()) + ", key " + std::string(MatchKeyName(options.match)) +
           (mapping.empty() ? "" : ", " + std::to_string(mapping.size()) + " renames") + ").");

  std::vector<CompareRow>& rows = report.rows;
  std::vector<PendingPair> pending;
  auto label = [](const DumpOp& op, const std::string& key) {
    return op.name + "." + op.phase + "." + std::to_string(op.index) + "." + key;
  };
  std::vector<char> matched_t(tgt->ops.size(), 0), matched_r(ref->ops.size(), 0);
  FileCache header_cache_t, header_cache_r;
  std::map<int64_t, size_t> ref_position;  // manifest index → position, for replayed outputs
  for (size_t i = 0; i < ref->ops.size(); ++i) ref_position[ref->ops[i].index] = i;
  for (const auto& op : tgt->ops) {
    if (op.replay_status == "ok") ++report.replay_ok;
    else if (!op.replay_status.empty()) ++report.replay_skipped;
  }
  auto read_error = [&](CompareRow& row, std::string message) {
    row.read_error = true;
    row.message = std::move(message);
  };
  for (auto [ti, ri] : pairs) {
    matched_t[static_cast<size_t>(ti)] = matched_r[static_cast<size_t>(ri)] = 1;
    const DumpOp& top = tgt->ops[static_cast<size_t>(ti)];
    const DumpOp& aligned = ref->ops[static_cast<size_t>(ri)];
    // Replayed outputs were computed from the inputs of the reference op the dumper paired them
    // with (same name and phase, same occurrence), which alignment may not have chosen.
    const DumpOp* replay_source = &aligned;
    std::string replay_problem;
    if (top.replay_reference >= 0) {
      auto it = ref_position.find(top.replay_reference);
      if (it == ref_position.end()) {
        replay_problem = "replayed from reference op #" + std::to_string(top.replay_reference) +
                         ", which this reference dump does not have (another load_file_path?)";
      } else if (ref->ops[it->second].name != aligned.name || ref->ops[it->second].phase != aligned.phase) {
        replay_problem = "replayed from reference op #" + std::to_string(top.replay_reference) + " (" +
                         ref->ops[it->second].name + "), not this operator: another load_file_path?";
      } else {
        replay_source = &ref->ops[it->second];
      }
    }
    std::set<std::string> target_keys;
    for (const auto& tt : top.tensors) {
      target_keys.insert(tt.key);
      CompareRow row;
      row.target_op = ti;
      row.replay = IsReplayKey(tt.key);
      std::string rkey = row.replay ? tt.key.substr(7) : tt.key;
      row.output = IsOutputKey(rkey);
      const DumpOp& rop = row.replay ? *replay_source : aligned;
      auto rit = std::find_if(rop.tensors.begin(), rop.tensors.end(), [&](const DumpTensor& x) { return x.key == rkey; });
      row.target = {label(top, tt.key), tt.dtype, tt.shape, std::nullopt};
      if (rit != rop.tensors.end()) row.reference = {label(rop, rit->key), rit->dtype, rit->shape, std::nullopt};
      row.verdict = Verdict::kUnmatched;
      if (row.replay && !replay_problem.empty()) {
        row.message = replay_problem;
      } else if (rit == rop.tensors.end()) {
        row.message = "no tensor " + rkey + " in the reference op";
      } else if (rit->shape != tt.shape) {
        row.message = "shape mismatch";
      } else if (top.file.empty() || rop.file.empty()) {
        StatsOnlyRow(tt, *rit, row);
      } else {
        auto tf = header_cache_t.Get(tgt->dir / top.file);
        auto rf = header_cache_r.Get(ref->dir / rop.file);
        if (!tf.ok() || !rf.ok()) {
          read_error(row, !tf.ok() ? tf.status().message() : rf.status().message());
        } else {
          auto ta = (*tf)->tensors().find(tt.key);
          auto ra = (*rf)->tensors().find(rkey);
          if (ta == (*tf)->tensors().end() || ra == (*rf)->tensors().end() ||
              ta->second.numel() != ra->second.numel()) {
            read_error(row, "tensor data missing or of another size");
          } else if (DTypeSize(ta->second.dtype) == 0 || DTypeSize(ra->second.dtype) == 0) {
            read_error(row, "unsupported element type");
          } else {
            PendingPair p;
            p.row = rows.size();
            p.tfile = tgt->dir / top.file, p.rfile = ref->dir / rop.file;
            p.tkey = tt.key, p.rkey = rkey;
            p.tdtype = ta->second.dtype, p.rdtype = ra->second.dtype;
            p.numel = ta->second.numel();
            pending.push_back(std::move(p));
          }
        }
      }
      rows.push_back(std::move(row));
    }
    // Tensors that only the reference op has (an output the target did not produce).
    for (const auto& rt : aligned.tensors) {
      if (target_keys.count(rt.key)) continue;
      CompareRow row;
      row.target_op = ti;
      row.output = IsOutputKey(rt.key);
      row.reference = {label(aligned, rt.key), rt.dtype, rt.shape, std::nullopt};
      row.verdict = Verdict::kUnmatched;
      row.message = "no tensor " + rt.key + " in the target op";
      rows.push_back(std::move(row));
    }
  }
  if (report.replay_ok + report.replay_skipped > 0)
    log.Info("Replayed operators in the target: " + std::to_string(report.replay_ok) + " (skipped: " +
             std::to_string(report.replay_skipped) + ", reasons in its manifest).");
  // Metrics: every pending pair split into element ranges, computed in parallel, merged in order
  // (so the sums, and the results, do not depend on the number of threads).
  struct Job {
    size_t pair;
    uint64_t begin, end;
  };
  std::vector<Job> work;
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    const auto& p = pending[i];
    total_bytes += p.numel * (DTypeSize(p.tdtype) + DTypeSize(p.rdtype));
    for (uint64_t b = 0; b < p.numel || b == 0; b += kRangeElements) {
      work.push_back({i, b, std::min(p.numel, b + kRangeElements)});
      if (p.numel == 0) break;
    }
  }
  std::vector<Partial> partials(work.size());
  {
    int jobs = options.jobs > 0 ? options.jobs : ctx.jobs;
    ThreadPool pool(jobs > 0 ? jobs : ThreadPool::DefaultThreads());
#ifdef PORTKIT_ACCURACY_AVX2
    const bool avx2 = simd::CpuHasAvx2();
#else
    const bool avx2 = false;
#endif
    std::vector<FileCache> tcaches(static_cast<size_t>(pool.size())), rcaches(static_cast<size_t>(pool.size()));
    std::vector<std::vector<double>> nbufs(static_cast<size_t>(pool.size()), std::vector<double>(MetricSet::kChunk));
    std::vector<std::vector<double>> bbufs(static_cast<size_t>(pool.size()), std::vector<double>(MetricSet::kChunk));
    // Progress only for large comparisons, about every tenth of the work.
    bool show_progress = total_bytes >= (uint64_t{256} << 20) && work.size() >= 10;
    size_t report_every = std::max<size_t>(1, work.size() / 10);
    std::atomic<size_t> done{0};
    log.Info("Comparing " + std::to_string(pending.size()) + " tensor pairs (" +
             std::to_string(total_bytes / 1'000'000) + " MB) on " + std::to_string(pool.size()) + " threads.");
    pool.ParallelFor(work.size(), [&](int w, size_t i) {
      auto wi = static_cast<size_t>(w);
      const Job& job = work[i];
      ComputeRange(pending[job.pair], job.begin, job.end, tcaches[wi], rcaches[wi], nbufs[wi], bbufs[wi], avx2,
                   partials[i]);
      size_t d = ++done;
      if (show_progress && d % report_every == 0 && d < work.size())
        log.Info(Progress::Percent(d, work.size()) + "comparing tensors");
    });
  }
  for (size_t i = 0; i < work.size();) {
    const PendingPair& p = pending[work[i].pair];
    CompareRow& row = rows[p.row];
    Partial merged = std::move(partials[i]);
    for (++i; i < work.size() && &pending[work[i].pair] == &p; ++i) {
      Partial& next = partials[i];
      if (!next.error.empty() && merged.error.empty()) merged.error = next.error;
      if (merged.error.empty()) {
        merged.metrics->Merge(*next.metrics);
        merged.ts.Merge(next.ts), merged.rs.Merge(next.rs);
        merged.identical_nonfinite += next.identical_nonfinite;
        merged.differing_nonfinite = merged.differing_nonfinite || next.differing_nonfinite;
      }
    }
    if (!merged.error.empty()) {
      read_error(row, merged.error);
      continue;
    }
    FinishRow(*merged.metrics, merged.ts, merged.rs, merged.differing_nonfinite, p.tdtype, row);
    ++report.tensor_pairs_compared;
    row.identical_nonfinite = merged.identical_nonfinite;
    if (merged.identical_nonfinite > 0 && row.message.empty())
      row.message = std::to_string(merged.identical_nonfinite) + " identical inf/nan positions left out";
    if (row.message.empty()) row.ulp_threshold = ToleranceFor(p.tdtype).ulp;
  }
  // Operators of one run with no counterpart in the other.
  auto unmatched = [&](const Dump& d, const std::vector<char>& seen, bool target) {
    for (size_t i = 0; i < d.ops.size(); ++i) {
      if (seen[i]) continue;
      CompareRow row;
      (target ? row.target : row.reference).name = label(d.ops[i], "*");
      row.verdict = Verdict::kUnmatched;
      row.message = target ? "no matching operator in the reference" : "no matching operator in the target";
      rows.push_back(std::move(row));
      (target ? report.unmatched_target_ops : report.unmatched_reference_ops).push_back(OpOf(d.ops[i]));
    }
  };
  unmatched(*tgt, matched_t, true);
  unmatched(*ref, matched_r, false);

  for (size_t i = 0; i < rows.size(); ++i) {
    ++report.verdict_counts[std::string(VerdictName(rows[i].verdict))];
    if (rows[i].read_error) report.read_errors.emplace_back(i, rows[i].message);
  }
  Divergence div = FindDivergence(rows);
  if (div.first_local >= 0) {
    report.first_divergence = OpOf(tgt->ops[static_cast<size_t>(div.first_local)]);
    report.first_divergence_basis = div.basis;
  }
  if (div.first_mismatch >= 0) report.first_mismatching_output = OpOf(tgt->ops[static_cast<size_t>(div.first_mismatch)]);
  return report;
}

}  // namespace portkit::accuracy
