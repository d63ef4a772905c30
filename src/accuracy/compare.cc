#include "accuracy/compare.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "accuracy/api.h"
#include "accuracy/judge.h"
#include "accuracy/metrics/metric.h"
#include "accuracy/metrics/simd.h"
#include "accuracy/msprobe_dump.h"
#include "accuracy/op_spill.h"
#include "accuracy/tensor_data_file.h"
#include "core/input_files.h"
#include "core/table.h"
#include "core/thread_pool.h"

namespace portkit::accuracy {
namespace fs = std::filesystem;

namespace {

/// Longest common subsequence of two key sequences by Myers' O((N+M)·D) algorithm in linear space
/// (D: the number of operators in one run and not the other): the middle snake of the edit graph
/// splits the problem in two, recursively; common prefixes and suffixes pair 1:1 first. Exact; its
/// time grows with how different the runs are, so a work bound (`budget`, snake steps) keeps a
/// pathological pair from running for hours: a sub-problem met after the budget is spent is solved
/// by dynamic programming when small, and otherwise left unmatched and counted in `stats`.
class Lcs {
 public:
  Lcs(const std::vector<int>& a, const std::vector<int>& b, uint64_t budget, AlignStats& stats)
      : a_(a), b_(b), budget_(budget), stats_(stats) {}

  void Run(size_t a0, size_t a1, size_t b0, size_t b1, std::vector<std::pair<long, long>>& out) {
    // Common prefix and suffix.
    while (a0 < a1 && b0 < b1 && a_[a0] == b_[b0]) out.emplace_back(static_cast<long>(a0++), static_cast<long>(b0++));
    size_t suf = 0;
    while (a0 < a1 - suf && b0 < b1 - suf && a_[a1 - 1 - suf] == b_[b1 - 1 - suf]) ++suf;
    a1 -= suf, b1 -= suf;
    if (a0 < a1 && b0 < b1) {
      size_t n = a1 - a0, m = b1 - b0;
      if (spent_ >= budget_) {
        if (n * m <= kExactCells) {
          Dp(a0, n, b0, m, out);
        } else {
          stats_.unaligned_target += n, stats_.unaligned_reference += m;
        }
      } else {
        size_t x, y;
        if (MiddleSnake(a0, n, b0, m, x, y)) {
          Run(a0, a0 + x, b0, b0 + y, out);
          Run(a0 + x, a1, b0 + y, b1, out);
        } else if (n * m <= kExactCells) {  // the budget ran out inside this search
          Dp(a0, n, b0, m, out);
        } else {
          stats_.unaligned_target += n, stats_.unaligned_reference += m;
        }
      }
    }
    for (size_t k = 0; k < suf; ++k) out.emplace_back(static_cast<long>(a1 + k), static_cast<long>(b1 + k));
  }

 private:
  static constexpr size_t kExactCells = 50'000'000;  // 200 MB of DP table at most

  /// A point (x, y) on an optimal path through a[a0, a0+n) × b[b0, b0+m), found by running the
  /// furthest-reaching D-paths from both corners until they overlap. False when the budget ran out.
  bool MiddleSnake(size_t a0, size_t n_, size_t b0, size_t m_, size_t& sx, size_t& sy) {
    const long n = static_cast<long>(n_), m = static_cast<long>(m_);
    const long max_d = (n + m + 1) / 2, offset = max_d, len = 2 * max_d + 2;
    vf_.assign(static_cast<size_t>(len), -1);
    vb_.assign(static_cast<size_t>(len), -1);
    vf_[static_cast<size_t>(offset + 1)] = 0, vb_[static_cast<size_t>(offset + 1)] = 0;
    const long delta = n - m;
    const bool front = (delta % 2) != 0;
    long k1s = 0, k1e = 0, k2s = 0, k2e = 0;
    const int* a = a_.data() + a0;
    const int* b = b_.data() + b0;
    for (long d = 0; d < max_d; ++d) {
      spent_ += static_cast<uint64_t>(2 * d + 2);
      if (spent_ > budget_) return false;
      for (long k1 = -d + k1s; k1 <= d - k1e; k1 += 2) {
        size_t ko = static_cast<size_t>(offset + k1);
        long x1 = (k1 == -d || (k1 != d && vf_[ko - 1] < vf_[ko + 1])) ? vf_[ko + 1] : vf_[ko - 1] + 1;
        long y1 = x1 - k1;
        long start = x1;
        while (x1 < n && y1 < m && a[x1] == b[y1]) ++x1, ++y1;
        spent_ += static_cast<uint64_t>(x1 - start);
        vf_[ko] = x1;
        if (x1 > n) {
          k1e += 2;
        } else if (y1 > m) {
          k1s += 2;
        } else if (front) {
          long k2o = offset + delta - k1;
          if (k2o >= 0 && k2o < len && vb_[static_cast<size_t>(k2o)] != -1 && x1 >= n - vb_[static_cast<size_t>(k2o)]) {
            sx = static_cast<size_t>(x1), sy = static_cast<size_t>(y1);
            return true;
          }
        }
      }
      for (long k2 = -d + k2s; k2 <= d - k2e; k2 += 2) {
        size_t ko = static_cast<size_t>(offset + k2);
        long x2 = (k2 == -d || (k2 != d && vb_[ko - 1] < vb_[ko + 1])) ? vb_[ko + 1] : vb_[ko - 1] + 1;
        long y2 = x2 - k2;
        long start = x2;
        while (x2 < n && y2 < m && a[n - x2 - 1] == b[m - y2 - 1]) ++x2, ++y2;
        spent_ += static_cast<uint64_t>(x2 - start);
        vb_[ko] = x2;
        if (x2 > n) {
          k2e += 2;
        } else if (y2 > m) {
          k2s += 2;
        } else if (!front) {
          long k1o = offset + delta - k2;
          if (k1o >= 0 && k1o < len && vf_[static_cast<size_t>(k1o)] != -1) {
            long x1 = vf_[static_cast<size_t>(k1o)];
            long y1 = offset + x1 - k1o;
            if (x1 >= n - x2) {
              sx = static_cast<size_t>(x1), sy = static_cast<size_t>(y1);
              return true;
            }
          }
        }
      }
    }
    // Unreachable for inputs whose first and last keys differ (the paths always meet); treat as
    // out of budget so the caller still answers.
    spent_ = budget_;
    return false;
  }

  /// Exact LCS by dynamic programming over n·m cells (n·m ≤ kExactCells).
  void Dp(size_t ai, size_t n, size_t bj, size_t m, std::vector<std::pair<long, long>>& out) {
    std::vector<uint32_t> dp((n + 1) * (m + 1), 0);
    auto at = [&](size_t i, size_t j) -> uint32_t& { return dp[i * (m + 1) + j]; };
    for (size_t i = n; i-- > 0;)
      for (size_t j = m; j-- > 0;)
        at(i, j) = a_[ai + i] == b_[bj + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    for (size_t i = 0, j = 0; i < n && j < m;) {
      if (a_[ai + i] == b_[bj + j]) {
        out.emplace_back(static_cast<long>(ai + i), static_cast<long>(bj + j)), ++i, ++j;
      } else if (at(i + 1, j) >= at(i, j + 1)) {
        ++i;
      } else {
        ++j;
      }
    }
  }

  const std::vector<int>& a_;
  const std::vector<int>& b_;
  uint64_t budget_, spent_ = 0;
  AlignStats& stats_;
  std::vector<long> vf_, vb_;
};

}  // namespace

int MetricValues::IndexOf(std::string_view name) {
  auto it = std::lower_bound(std::begin(kNames), std::end(kNames), name);
  return it != std::end(kNames) && *it == name ? static_cast<int>(it - std::begin(kNames)) : -1;
}

double& MetricValues::operator[](std::string_view name) {
  int i = IndexOf(name);
  if (i < 0) throw std::invalid_argument("not a compare metric: " + std::string(name));
  if (!(present_ & (1u << i))) present_ |= 1u << i, values_[i] = 0;
  return values_[i];
}

MetricValues::const_iterator MetricValues::find(std::string_view name) const {
  int i = IndexOf(name);
  return i >= 0 && (present_ & (1u << i)) ? const_iterator(this, i) : end();
}

const double& MetricValues::at(std::string_view name) const {
  int i = IndexOf(name);
  if (i < 0 || !(present_ & (1u << i))) throw std::out_of_range("no metric " + std::string(name) + " in this row");
  return values_[i];
}

std::vector<std::pair<long, long>> AlignKeys(const std::vector<std::string>& ka, const std::vector<std::string>& kb,
                                             AlignStats* stats, uint64_t budget) {
  std::vector<std::pair<long, long>> out;
  // Keys as small integers: comparisons in the quadratic part are then one instruction.
  std::unordered_map<std::string, int> ids;
  std::vector<int> a, b;
  a.reserve(ka.size()), b.reserve(kb.size());
  for (const auto& k : ka) a.push_back(ids.emplace(k, static_cast<int>(ids.size())).first->second);
  for (const auto& k : kb) b.push_back(ids.emplace(k, static_cast<int>(ids.size())).first->second);
  AlignStats local;
  AlignStats& st = stats ? *stats : local;
  st = AlignStats{};
  Lcs(a, b, budget, st).Run(0, a.size(), 0, b.size(), out);
  return out;
}

namespace {

struct TensorStats {
  double max = -INFINITY, min = INFINITY, sum = 0, sq = 0;
  size_t count = 0;
  bool nonfinite = false, nan = false;
  void Merge(const TensorStats& o) {
    max = std::max(max, o.max), min = std::min(min, o.min), sum += o.sum, sq += o.sq, count += o.count;
    nonfinite = nonfinite || o.nonfinite, nan = nan || o.nan;
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
    // Rare: confirm (huge finite values can overflow a sum). A sum that is ±inf holds no nan, so a
    // tensor with -inf masks in every chunk is scanned once, not chunk after chunk.
    if (!std::isfinite(chunk_sum) && (!nonfinite || (std::isnan(chunk_sum) && !nan))) {
      for (size_t i = 0; i < c; ++i) nonfinite = nonfinite || !std::isfinite(v[i]), nan = nan || std::isnan(v[i]);
    }
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
  PORTKIT_AVX2_FN static void AddAvx2(const double* v, size_t c, double& max, double& min, double& sum, double& sq) {
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
  /// Adds a chunk of c finite values that MetricSet::AccumulateF32 summed (its running max/min
  /// already updated); the same state as Add of that chunk.
  void AddFused(double new_max, double new_min, double chunk_sum, double chunk_sq, size_t c) {
    max = new_max, min = new_min, sum += chunk_sum, sq += chunk_sq, count += c;
  }
  double mean() const { return count ? sum / static_cast<double>(count) : 0; }
  double norm() const { return std::sqrt(sq); }
  /// As torch reports them: a nan anywhere makes every statistic nan.
  TensorStatistics Public() const {
    if (nan) return {NAN, NAN, NAN, NAN};
    return {max, min, mean(), norm()};
  }
};

/// Statistics-only rows: No when a statistic differs by more than kStatsRelTolerance of its scale...
/// ...and by more than this in absolute terms (as MaxAbsErr > 0.001 for tensors).
constexpr double kStatsAbsTolerance = 0.001;

/// Returns freed heap memory to the system (glibc keeps freed small blocks; the manifests of a
/// 100k-operator comparison are ~170 MB of them). No-op elsewhere.
void TrimHeap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/// Shortest text that reads back as the same double.
std::string Shortest(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

/// Relative error above which a one-element tensor (a scalar loss, a norm) is judged No: 10⁻³, or
/// four roundings of the target type when that is coarser.
double ScalarTolerance(DType target) { return std::max(1e-3, 4 * UnitRoundoff(target)); }

/// What the comparison of one tensor pair found beyond the metrics.
struct PairFacts {
  bool differing_nonfinite = false;  ///< an inf/nan that the other run does not have there
  uint64_t identical_nonfinite = 0;  ///< positions holding the same inf/nan in both (left out)
  bool integer = false;              ///< both integer or bool: compared exactly, as integers
  uint64_t int_mismatch = 0;         ///< integer elements that differ
  double int_max_diff = 0;           ///< the largest integer difference (exact up to 2^53)
};

/// Fills a compared row's metrics, statistics and verdict. Floating types: No when Cosine < 0.99
/// and MaxAbsErr > 0.001, Cosine < 0.9, MaxAbsErr > 1, or nan/inf; a one-element tensor (whose
/// cosine is always ±1) is No when its relative error exceeds ScalarTolerance. A tensor with no
/// finite position to compare (all nan in both runs) is No. Integer and bool tensors must match
/// exactly, compared as integers (not through double).
void FinishRow(const MetricSet& metric_set, const TensorStats& ts, const TensorStats& rs, const PairFacts& f,
               DType tdtype, CompareRow& row) {
  for (const auto& [k, v] : metric_set.Results()) row.metrics[k] = v;
  row.compared = true;
  row.elements = ts.count;
  if (ts.count > 0) {  // an empty tensor has no statistics
    row.target.stats = ts.Public();
    row.reference.stats = rs.Public();
  }
  double cos = row.metrics["Cosine"], mae = row.metrics["MaxAbsErr"], mre = row.metrics["MaxRelativeErr"];
  bool bad;
  if (f.integer) {
    row.metrics["MaxAbsErr"] = f.int_max_diff;
    row.mismatched_elements = f.int_mismatch;
    bad = f.int_mismatch != 0;
    if (bad) row.message = "integer data differ";
  } else if (ts.count == 1) {
    bad = std::isnan(mre) || f.differing_nonfinite ||
          (mre > ScalarTolerance(tdtype) && mae > ToleranceFor(tdtype).small_value_atol);
    if (bad && !f.differing_nonfinite)
      row.message = "one value: relative error above " + Shortest(ScalarTolerance(tdtype));
  } else {
    bad = std::isnan(cos) || std::isnan(mae) || std::isinf(mae) || f.differing_nonfinite ||
          (cos < 0.99 && mae > 0.001) || cos < 0.9 || mae > 1;
  }
  row.identical_nonfinite = f.identical_nonfinite;
  if (f.differing_nonfinite) row.message = "inf or nan in the data";
  if (!f.integer && ts.count > 0 && f.identical_nonfinite == ts.count && (ts.nan || rs.nan)) {
    // The same nan/inf at every position in both runs: the target reproduces the reference, but
    // there is no number to judge. Not a divergence (two identical runs must name no culprit).
    row.verdict = Verdict::kNotApplicable;
    row.message = "no finite value to compare: the same nan or inf at every position in both runs";
    return;
  }
  row.verdict = bad ? Verdict::kNo : Verdict::kYes;
}

CompareOp OpOf(const DumpOp& op) { return {op.index, op.name, op.phase, op.module, op.stack, op.forward}; }

}  // namespace

namespace {

/// One tensor comparison whose metrics still have to be computed: positions into the dumps (no
/// strings of its own: a compare of 100k tensors keeps 100k of these).
struct PendingPair {
  size_t row = 0;
  /// Lengths of the tensor keys, which end the row's target / reference names (`op.phase.index.key`).
  uint32_t tkey_len = 0, rkey_len = 0;
  uint32_t top = 0, rop = 0;  ///< target / reference operator positions in their dumps
  DType tdtype = DType::kUnknown, rdtype = DType::kUnknown;
  uint64_t numel = 0;
};

/// The tensor file names of a dump's operators, by position, in one string (no allocation each).
class FileNames {
 public:
  void Add(std::string_view name) {
    text_ += name;
    end_.push_back(text_.size());
  }
  std::string_view operator[](size_t i) const {
    size_t begin = i == 0 ? 0 : end_[i - 1];
    return std::string_view(text_).substr(begin, end_[i] - begin);
  }
  void Clear() {
    std::string().swap(text_);
    std::vector<size_t>().swap(end_);
  }

 private:
  std::string text_;
  std::vector<size_t> end_;
};

/// A dump's operators read forward on demand and dropped once behind (compare walks both dumps
/// in execution order): only the operators between two matched ones are held, not the dump.
/// `on_read` sees each operator once, in order. The dump was counted by a first pass: a second
/// read that finds another number of operators (the files changed in between) is an error.
class OpWindow {
 public:
  using OnRead = std::function<void(const DumpOp&)>;
  OpWindow(DumpReader reader, size_t expected, OnRead on_read)
      : reader_(std::move(reader)), expected_(expected), on_read_(std::move(on_read)) {}

  /// Reads operators up to position `pos` (which must not have been released).
  Status ReadTo(size_t pos) {
    while (pos >= base_ + ops_.size()) {
      DumpOp op;
      auto more = reader_.Next(op);
      if (!more.ok()) return more.status();
      if (!*more || base_ + ops_.size() >= expected_) return Changed();
      on_read_(op);
      ops_.push_back(std::move(op));
    }
    return Status::Ok();
  }
  /// An operator read and not released.
  const DumpOp& At(size_t pos) const { return ops_.at(pos - base_); }
  void ReleaseBefore(size_t pos) {
    for (; base_ < pos && !ops_.empty(); ++base_) ops_.pop_front();
  }
  /// Every operator read, and no more in the dump.
  Status Finish() {
    DumpOp op;
    auto more = reader_.Next(op);
    if (!more.ok()) return more.status();
    if (*more || base_ + ops_.size() != expected_) return Changed();
    return Status::Ok();
  }

 private:
  Status Changed() const {
    return IoError(reader_.dir().string() + ": the dump changed while compare was reading it (" +
                   std::to_string(expected_) + " operators on the first reading, not on the second)");
  }
  DumpReader reader_;
  size_t expected_;
  OnRead on_read_;
  std::deque<DumpOp> ops_;
  size_t base_ = 0;  // position of ops_.front()
};

/// Metrics and statistics of one element range of a pending pair.
struct Partial {
  std::unique_ptr<MetricSet> metrics;
  TensorStats ts, rs;
  PairFacts facts;
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

/// Opened tensor files of one worker (only the last few stay mapped): safetensors files of
/// portkit's dumps, or msprobe's one file per tensor (.pt / .npy; tensor_data_file.h).
class FileCache {
 public:
  explicit FileCache(TensorLimits limits) : limits_(limits) {}
  Expected<const TensorDataFile*> Get(const fs::path& path) {
    if (auto it = open_.find(path); it != open_.end()) return &it->second;
    if (open_.size() > 16) open_.clear();
    auto f = TensorDataFile::Open(path, limits_);
    if (!f.ok()) return f.status();
    return &open_.emplace(path, std::move(*f)).first->second;
  }

 private:
  TensorLimits limits_;
  std::map<fs::path, TensorDataFile> open_;
};

/// One chunk of fp32 pairs in MetricSet's fused pass (statistics included); false when it does
/// not apply (a partial chunk, inf or nan in it, no AVX2), nothing changed then.
bool AccumulateFusedF32(const uint8_t* t, const uint8_t* r, size_t c, Partial& out) {
  FusedSums s;
  s.n_max = out.ts.max, s.n_min = out.ts.min, s.b_max = out.rs.max, s.b_min = out.rs.min;
  if (!out.metrics->AccumulateF32(t, r, c, s)) return false;
  out.ts.AddFused(s.n_max, s.n_min, s.n_sum, s.n_sq, c);
  out.rs.AddFused(s.b_max, s.b_min, s.b_sum, s.b_sq, c);
  return true;
}

constexpr uint64_t kRangeElements = uint64_t{1} << 22;  // a unit of parallel work (16 MB of fp32)

/// `tfile` / `rfile`: the files holding the pair's tensors (TensorDataPath).
void ComputeRange(const PendingPair& p, const std::string& tkey, const std::string& rkey, const fs::path& tfile,
                  const fs::path& rfile, uint64_t begin, uint64_t end, FileCache& tcache, FileCache& rcache,
                  std::vector<double>& nbuf, std::vector<double>& bbuf, bool avx2, Partial& out) {
  auto tf = tcache.Get(tfile);
  auto rf = rcache.Get(rfile);
  if (!tf.ok() || !rf.ok()) {
    out.error = !tf.ok() ? tf.status().message() : rf.status().message();
    return;
  }
  const TensorInfo* tfound = (*tf)->Find(tkey);
  const TensorInfo* rfound = (*rf)->Find(rkey);
  if (!tfound || !rfound || tfound->numel() != p.numel || rfound->numel() != p.numel || tfound->dtype != p.tdtype ||
      rfound->dtype != p.rdtype) {  // the file changed since the pairs were set up
    out.error = (!tfound || tfound->numel() != p.numel || tfound->dtype != p.tdtype ? tfile : rfile).string() +
                ": tensor data missing or changed while compare ran";
    return;
  }
  const TensorInfo& ta = *tfound;
  const TensorInfo& ra = *rfound;
  std::vector<uint8_t> tgather, rgather;  // used only by tensors whose elements are not contiguous
  out.metrics = std::make_unique<MetricSet>(p.tdtype);
  const size_t te = DTypeSize(p.tdtype);
  out.facts.integer = !IsFloating(p.tdtype) && !IsFloating(p.rdtype);
  const bool fp32 = p.tdtype == DType::kF32 && p.rdtype == DType::kF32;
  for (uint64_t at = begin; at < end; at += nbuf.size()) {
    size_t c = static_cast<size_t>(std::min<uint64_t>(nbuf.size(), end - at));
    const uint8_t* tsrc = (*tf)->Elements(ta, at, c, tgather);
    const uint8_t* rsrc = (*rf)->Elements(ra, at, c, rgather);
    if (fp32 && AccumulateFusedF32(tsrc, rsrc, c, out)) continue;
    DecodeToDouble(p.tdtype, tsrc, c, nbuf.data());
    DecodeToDouble(p.rdtype, rsrc, c, bbuf.data());
    out.ts.Add(nbuf.data(), c, avx2);  // the statistics describe the data as it is
    out.rs.Add(bbuf.data(), c, avx2);
    if (out.ts.nonfinite || out.rs.nonfinite)
      out.facts.differing_nonfinite |=
          MaskIdenticalNonFinite(nbuf.data(), bbuf.data(), c, out.facts.identical_nonfinite);
    out.metrics->Accumulate(nbuf.data(), bbuf.data(), c);
    // Integers exactly (64-bit values beyond 2^53 have no exact double): equal bytes of one type
    // need no more; otherwise element by element in 128 bits.
    if (out.facts.integer && !(p.tdtype == p.rdtype && std::memcmp(tsrc, rsrc, c * te) == 0)) {
      for (size_t i = 0; i < c; ++i) {
        __int128 d = IntegerAt(p.tdtype, tsrc, i) - IntegerAt(p.rdtype, rsrc, i);
        if (d == 0) continue;
        ++out.facts.int_mismatch;
        double ad = static_cast<double>(d < 0 ? -d : d);
        out.facts.int_max_diff = std::max(out.facts.int_max_diff, ad);
      }
    }
  }
  (*tf)->Release(ta, begin, end - begin);  // memory stays flat however large the dumps are
  (*rf)->Release(ra, begin, end - begin);
  out.metrics->ReleaseScratch();  // kept until the merge: only the sums, not the scratch, per pair
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
    if (t.empty() || r.empty()) return ParseError(path + ":" + std::to_string(line_no) + ": empty operator name");
    out[t] = r;
  }
  return out;
}

/// A manifest element type that portkit cannot compare (complex, fp8 "fnuz", ...).
bool Unsupported(const std::string& dtype) { return !dtype.empty() && ParseDType(dtype) == DType::kUnknown; }

/// Warnings naming a data file whose element type contradicts its manifest, before the rest are
/// only counted.
constexpr size_t kMaxDTypeWarnings = 10;

/// "FILE: holds X data, dump.json says Y" when the element type of tensor `t` in `file` is not
/// the manifest's `dtype`; empty when they agree or the manifest names none. `op_file` tells
/// which manifest (an msprobe dump's tensor files are in kTensorDataFolder).
std::string DTypeContradiction(const std::string& dtype, const TensorInfo& t, const TensorDataFile& file,
                               const fs::path& path, std::string_view op_file) {
  if (dtype.empty() || ParseDType(dtype) == t.dtype) return {};
  // numpy has no bf16 or fp8: msprobe (and MindSpore) write such tensors to .npy as float32.
  const DType declared = ParseDType(dtype);
  if ((declared == DType::kBF16 || declared == DType::kF8E4M3 || declared == DType::kF8E5M2) &&
      t.dtype == DType::kF32 && path.extension() == ".npy")
    return {};
  std::string held = t.dtype != DType::kUnknown ? std::string(DTypeName(t.dtype)) : "";
  if (!file.TypeName().empty()) held = held.empty() ? file.TypeName() : held + " (" + file.TypeName() + ")";
  if (held.empty()) held = "an element type portkit does not compare";
  return path.string() + ": holds " + held + " data, " +
         (op_file == kTensorDataFolder ? "dump.json" : "manifest.jsonl") + " says " + dtype +
         (t.dtype != DType::kUnknown ? "; compared as the file's type" : "; not compared");
}

std::string JoinNotes(const std::string& a, const std::string& b) {
  return a.empty() ? b : b.empty() ? a : a + "; " + b;
}

/// A pair without tensor data (stats_only dumps), judged from the manifests' statistics: the
/// relative difference of max, min, mean and l2 norm, each against max(|reference value|, the
/// reference's root mean square), so a mean near zero is not blown up; No when the largest exceeds
/// kStatsRelTolerance (and kStatsAbsTolerance in absolute terms), when the inf/nan counts differ, or
/// for integer tensors whose checksums differ. Equal checksums of one type: identical, Yes.
void StatsOnlyRow(const DumpTensor& t, const DumpTensor& r, CompareRow& row) {
  row.from_statistics = true;
  if (t.has_stats && r.has_stats) {
    row.target.stats = TensorStatistics{t.max, t.min, t.mean, t.norm};
    row.reference.stats = TensorStatistics{r.max, r.min, r.mean, r.norm};
  }
  const bool same_bytes = t.crc32 >= 0 && r.crc32 >= 0 && t.crc32 == r.crc32 && t.dtype == r.dtype;
  if (same_bytes) {
    row.verdict = Verdict::kYes;
    row.message = "stats-only dump: checksums equal (identical bytes)";
    for (const char* k : {"MaxRelDiff", "MinRelDiff", "MeanRelDiff", "NormRelDiff", "StatsRelDiff"}) row.metrics[k] = 0;
    return;
  }
  if (!t.has_stats || !r.has_stats) {
    row.verdict = Verdict::kNotApplicable;
    row.message = "stats-only dump: no statistics to compare";
    return;
  }
  double numel = 1;
  for (int64_t d : r.shape) numel *= static_cast<double>(d);
  const double rms = numel > 0 && std::isfinite(r.norm) ? r.norm / std::sqrt(numel) : 0;
  double worst = 0, worst_abs = 0;
  bool nonfinite_differs = false;
  auto rel = [&](const char* key, double tv, double rv) {
    double d;
    if (!std::isfinite(tv) || !std::isfinite(rv)) {
      bool same = tv == rv || (std::isnan(tv) && std::isnan(rv));
      d = same ? 0 : INFINITY;
      nonfinite_differs = nonfinite_differs || !same;
    } else {
      double diff = std::fabs(tv - rv);
      double scale = std::max({std::fabs(rv), rms, 1e-30});
      d = diff / scale;
      if (d > worst) worst_abs = diff;
    }
    row.metrics[key] = d;
    worst = std::max(worst, d);
  };
  rel("MaxRelDiff", t.max, r.max);
  rel("MinRelDiff", t.min, r.min);
  rel("MeanRelDiff", t.mean, r.mean);
  rel("NormRelDiff", t.norm, r.norm);
  row.metrics["StatsRelDiff"] = worst;
  const bool counts_differ =
      (t.nan >= 0 && r.nan >= 0 && t.nan != r.nan) || (t.inf >= 0 && r.inf >= 0 && t.inf != r.inf);
  const DType td = ParseDType(t.dtype), rd = ParseDType(r.dtype);
  const bool integer = !IsFloating(td) && !IsFloating(rd);
  bool bad;
  if (nonfinite_differs || counts_differ) {
    bad = true;
    row.message = "stats-only dump: inf or nan in the data";
  } else if (integer && t.crc32 >= 0 && r.crc32 >= 0 && td == rd) {
    bad = true;  // same integer type, other bytes
    row.message = "stats-only dump: integer data differ (checksums)";
  } else {
    bad = worst > kStatsRelTolerance && worst_abs > kStatsAbsTolerance;
    row.message = "stats-only dump: judged from max/min/mean/l2norm (largest relative difference " + Brief(worst) + ")";
  }
  row.verdict = bad ? Verdict::kNo : Verdict::kYes;
}

/// Rows made, computed and judged at a time: enough for the thread pool to be busy, few enough to
/// keep the memory of a 900k-row comparison to a few tens of megabytes.
constexpr size_t kBatchRows = 16384;

/// Computes the metrics of a batch's pending pairs: each split into element ranges, computed in
/// parallel, merged in order (so the sums, and the results, do not depend on the number of
/// threads), and the rows finished. The pool, the open files and the buffers serve every batch.
class BatchComputer {
 public:
  BatchComputer(const CompareOptions& options, Context& ctx, const FileNames& tfiles, const FileNames& rfiles)
      : options_(options),
        log_(ctx.logger),
        tfiles_(tfiles),
        rfiles_(rfiles),
        limits_{options.max_view_elements},
        pool_([&] {
          int jobs = options.jobs > 0 ? options.jobs : ctx.jobs;
          return jobs > 0 ? jobs : ThreadPool::DefaultThreads();
        }()) {
#ifdef PORTKIT_ACCURACY_AVX2
    avx2_ = simd::CpuHasAvx2();
#endif
  }
  /// Pairs compared (with metrics) by the last Run.
  size_t compared() const { return compared_; }

  /// `last`: the run's last batch. When no batch before it had pairs to compare, it holds every
  /// pair of the run, and the log says so as for a run of one batch.
  Status Run(std::vector<CompareRow>& rows, const std::vector<PendingPair>& pending, bool last) {
    compared_ = 0;
    const bool whole_run = last && batches_ == 0;
    if (pending.empty() && !whole_run) return Status::Ok();
    if (tcaches_.empty()) {
      for (int w = 0; w < pool_.size(); ++w) {
        tcaches_.emplace_back(limits_), rcaches_.emplace_back(limits_);
        nbufs_.emplace_back(MetricSet::kChunk), bbufs_.emplace_back(MetricSet::kChunk);
      }
    }
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
    // A pair of one range (nearly all of them) is finished by the worker that computed it, with
    // that worker's buffers: only pairs split into several ranges keep their partial sums until the
    // merge.
    std::vector<std::unique_ptr<Partial>> partials(work.size());
    std::atomic<size_t> compared{0};
    auto finish = [&](const PendingPair& p, Partial& merged) {
      CompareRow& row = rows[p.row];
      if (!merged.error.empty()) {
        row.read_error = true;
        row.message = merged.error;
        return;
      }
      std::string note = std::move(row.message);  // an element type contradicting the manifest
      row.message.clear();
      FinishRow(*merged.metrics, merged.ts, merged.rs, merged.facts, p.tdtype, row);
      if (!note.empty()) row.message = JoinNotes(row.message, note);
      ++compared;
      if (row.identical_nonfinite > 0 && row.message.empty())
        row.message = std::to_string(row.identical_nonfinite) + " identical inf/nan positions left out";
      if (row.message.empty()) row.ulp_threshold = ToleranceFor(p.tdtype).ulp;
    };
    // Progress only for large comparisons, about every tenth of the work.
    bool show_progress = total_bytes >= (uint64_t{256} << 20) && work.size() >= 10;
    size_t report_every = std::max<size_t>(1, work.size() / 10);
    std::atomic<size_t> done{0};
    const std::string what = std::to_string(pending.size()) + " tensor pairs (" +
                             std::to_string(total_bytes / 1'000'000) + " MB) on " + std::to_string(pool_.size()) +
                             " threads.";
    if (whole_run) {
      log_.Info("Comparing " + what);
    } else {
      if (batches_ == 0)
        log_.Info("Comparing tensor pairs a batch of " + std::to_string(kBatchRows) + " rows at a time on " +
                  std::to_string(pool_.size()) + " threads.");
      log_.Debug("Comparing a batch of " + what);
    }
    ++batches_;
    pool_.ParallelFor(work.size(), [&](int w, size_t i) {
      auto wi = static_cast<size_t>(w);
      const Job& job = work[i];
      const PendingPair& p = pending[job.pair];
      const bool whole = job.begin == 0 && job.end == p.numel;
      Partial local;
      Partial& out = whole ? local : *(partials[i] = std::make_unique<Partial>());
      const std::string& tname = rows[p.row].target.name;
      const std::string& rname = rows[p.row].reference.name;
      // Checked when the pair was set up (a data_name that is no file name never gets here).
      const auto tpath = TensorDataPath(options_.target, tfiles_[p.top], rows[p.row].target.data_name);
      const auto rpath = TensorDataPath(options_.reference, rfiles_[p.rop], rows[p.row].reference.data_name);
      ComputeRange(p, tname.substr(tname.size() - p.tkey_len), rname.substr(rname.size() - p.rkey_len),
                   tpath.ok() ? *tpath : fs::path(), rpath.ok() ? *rpath : fs::path(), job.begin, job.end, tcaches_[wi],
                   rcaches_[wi], nbufs_[wi], bbufs_[wi], avx2_, out);
      if (whole) finish(p, local);
      size_t d = ++done;
      if (show_progress && d % report_every == 0 && d < work.size())
        log_.Info(Progress::Percent(d, work.size()) + "comparing tensors");
    });
    for (size_t i = 0; i < work.size();) {
      const PendingPair& p = pending[work[i].pair];
      if (!partials[i]) {  // finished by its worker
        ++i;
        continue;
      }
      Partial merged = std::move(*partials[i]);
      partials[i].reset();
      for (++i; i < work.size() && &pending[work[i].pair] == &p; ++i) {
        Partial& next = *partials[i];
        if (!next.error.empty() && merged.error.empty()) merged.error = next.error;
        if (merged.error.empty()) {
          merged.metrics->Merge(*next.metrics);
          merged.ts.Merge(next.ts), merged.rs.Merge(next.rs);
          merged.facts.identical_nonfinite += next.facts.identical_nonfinite;
          merged.facts.differing_nonfinite = merged.facts.differing_nonfinite || next.facts.differing_nonfinite;
          merged.facts.int_mismatch += next.facts.int_mismatch;
          merged.facts.int_max_diff = std::max(merged.facts.int_max_diff, next.facts.int_max_diff);
        }
        partials[i].reset();
      }
      finish(p, merged);
    }
    compared_ = compared;
    return Status::Ok();
  }

 private:
  const CompareOptions& options_;
  Logger& log_;
  const FileNames& tfiles_;
  const FileNames& rfiles_;
  TensorLimits limits_;
  ThreadPool pool_;
  bool avx2_ = false;
  std::vector<FileCache> tcaches_, rcaches_;
  std::vector<std::vector<double>> nbufs_, bbufs_;
  size_t compared_ = 0;
  size_t batches_ = 0;
};

}  // namespace

std::string OpMatchKey(const DumpOp& op, bool with_shapes, const std::string* name) {
  std::string k = (name ? *name : op.name) + "|" + op.phase;
  if (!with_shapes) return k;
  for (const auto& t : op.tensors)
    if (IsOutputKey(t.key)) k += "|" + ShapeText(t.shape);
  return k;
}

std::string_view MatchKeyName(MatchKey key) { return key == MatchKey::kName ? "name" : "name+shape"; }

std::string_view DivergenceStateName(DivergenceState state) {
  switch (state) {
    case DivergenceState::kCulprit: return "culprit";
    case DivergenceState::kDrift: return "drift";
    case DivergenceState::kNone: break;
  }
  return "none";
}

std::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kYes: return "Yes";
    case Verdict::kNo: return "No";
    case Verdict::kNotApplicable: return "N/A";
    case Verdict::kUnmatched: return "Unmatched";
  }
  return "Unmatched";
}

const std::string& CompareReport::TargetForward(const CompareRow& row) const {
  static const std::string kNone;
  if (row.target_op < 0 || static_cast<size_t>(row.target_op) >= target_forward.size()) return kNone;
  return target_forward[static_cast<size_t>(row.target_op)];
}

bool CompareReport::HasMismatch() const {
  auto it = verdict_counts.find(std::string(VerdictName(Verdict::kNo)));
  return it != verdict_counts.end() && it->second > 0;
}

/// Rows written to an unnamed temporary file (O_TMPFILE, or a file unlinked at once where the file
/// system has none), each as its byte length and its fields; read back in order as often as asked.
class RowSpill {
 public:
  static Expected<std::shared_ptr<RowSpill>> Create(const fs::path& dir) {
    auto fd = OpenUnnamedTempFile(dir, ".portkit-compare-rows", "compare's rows");
    if (!fd) return fd.status();
    return std::shared_ptr<RowSpill>(new RowSpill(*fd, dir));
  }
  ~RowSpill() { ::close(fd_); }
  RowSpill(const RowSpill&) = delete;
  RowSpill& operator=(const RowSpill&) = delete;

  Status Append(const CompareRow& r) {
    const size_t at = buf_.size();
    Put<uint32_t>(0);
    PutSide(r.target), PutSide(r.reference);
    Put<uint8_t>(static_cast<uint8_t>(r.verdict));
    PutString(r.message);
    uint8_t flags =
        static_cast<uint8_t>(r.compared | r.from_statistics << 1 | r.discrete << 2 | r.negligible << 3 | r.output << 4 |
                             r.replay << 5 | r.read_error << 6 | r.ulp_threshold.has_value() << 7);
    Put<uint8_t>(flags);
    uint32_t present = 0;
    double values[MetricValues::kCount];
    for (int i = 0; i < MetricValues::kCount; ++i) {
      auto it = r.metrics.find(MetricValues::kNames[i]);
      if (it != r.metrics.end()) present |= 1u << i, values[i] = it->second;
    }
    Put<uint32_t>(present);
    for (int i = 0; i < MetricValues::kCount; ++i)
      if (present & (1u << i)) Put<double>(values[i]);
    Put<uint64_t>(r.identical_nonfinite);
    if (r.ulp_threshold) Put<double>(*r.ulp_threshold);
    Put<uint64_t>(r.elements), Put<uint64_t>(r.mismatched_elements);
    Put<int64_t>(r.target_op), Put<int64_t>(r.reference_op);
    const auto length = static_cast<uint32_t>(buf_.size() - at - sizeof(uint32_t));
    std::memcpy(buf_.data() + at, &length, sizeof length);
    return buf_.size() >= kBufferBytes ? Flush() : Status::Ok();
  }
  /// Writes what is buffered.
  Status Flush() {
    for (size_t done = 0; done < buf_.size();) {
      ssize_t n = ::pwrite(fd_, buf_.data() + done, buf_.size() - done, static_cast<off_t>(size_ + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return WriteError();
      done += static_cast<size_t>(n);
    }
    size_ += buf_.size();
    buf_.clear();
    return Status::Ok();
  }

  Status ForEach(const std::function<Status(const CompareRow&)>& fn) const {
    std::string buf;
    size_t pos = 0;     // of the next row in buf
    uint64_t read = 0;  // bytes of the file in buf so far
    CompareRow row;
    for (;;) {
      uint32_t length = 0;
      if (buf.size() - pos >= sizeof length) std::memcpy(&length, buf.data() + pos, sizeof length);
      if (buf.size() - pos < sizeof length || buf.size() - pos - sizeof length < length) {
        if (read == size_) {
          if (pos == buf.size()) return Status::Ok();
          return ReadError("cut short");
        }
        buf.erase(0, pos), pos = 0;
        const size_t want = std::max<size_t>(kBufferBytes, sizeof length + length);
        const size_t old = buf.size();
        const size_t n_want = static_cast<size_t>(std::min<uint64_t>(want, size_ - read));
        buf.resize(old + n_want);
        for (size_t got = 0; got < n_want;) {
          ssize_t n = ::pread(fd_, buf.data() + old + got, n_want - got, static_cast<off_t>(read + got));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) return ReadError(n < 0 ? std::strerror(errno) : "cut short");
          got += static_cast<size_t>(n);
        }
        read += n_want;
        continue;
      }
      const char* p = buf.data() + pos + sizeof length;
      const char* end = p + length;
      row = CompareRow();
      if (!GetRow(p, end, row) || p != end) return ReadError("damaged");
      pos += sizeof length + length;
      PORTKIT_RETURN_IF_ERROR(fn(row));
    }
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;
  RowSpill(int fd, fs::path dir) : fd_(fd), dir_(std::move(dir)) {}
  Status WriteError() const {
    return IoError(dir_.string() + ": cannot write compare's rows to a temporary file there (" + std::strerror(errno) +
                   "); free some space, or choose another -o");
  }
  Status ReadError(const std::string& why) const {
    return IoError(dir_.string() + ": cannot read compare's rows back from their temporary file (" + why + ")");
  }
  template <typename T>
  void Put(T v) {
    buf_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void PutString(const std::string& s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    buf_ += s;
  }
  void PutSide(const CompareSide& side) {
    PutString(side.name);
    Put<uint8_t>(
        static_cast<uint8_t>(side.dtype.has_value() | side.shape.has_value() << 1 | side.stats.has_value() << 2));
    if (side.dtype) PutString(*side.dtype);
    if (side.shape) {
      Put<uint32_t>(static_cast<uint32_t>(side.shape->size()));
      for (int64_t d : *side.shape) Put<int64_t>(d);
    }
    if (side.stats) Put(side.stats->max), Put(side.stats->min), Put(side.stats->mean), Put(side.stats->norm);
    Put<int8_t>(side.requires_grad);
    PutString(side.data_name);
  }
  template <typename T>
  static bool Get(const char*& p, const char* end, T& v) {
    if (static_cast<size_t>(end - p) < sizeof v) return false;
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    return true;
  }
  static bool GetString(const char*& p, const char* end, std::string& s) {
    uint32_t n = 0;
    if (!Get(p, end, n) || static_cast<size_t>(end - p) < n) return false;
    s.assign(p, n);
    p += n;
    return true;
  }
  static bool GetSide(const char*& p, const char* end, CompareSide& side) {
    uint8_t has = 0;
    if (!GetString(p, end, side.name) || !Get(p, end, has)) return false;
    if (has & 1 && !GetString(p, end, side.dtype.emplace())) return false;
    if (has & 2) {
      uint32_t n = 0;
      if (!Get(p, end, n) || static_cast<size_t>(end - p) / sizeof(int64_t) < n) return false;
      auto& shape = side.shape.emplace(n);
      for (auto& d : shape) Get(p, end, d);
    }
    if (has & 4) {
      auto& st = side.stats.emplace();
      if (!Get(p, end, st.max) || !Get(p, end, st.min) || !Get(p, end, st.mean) || !Get(p, end, st.norm)) return false;
    }
    return Get(p, end, side.requires_grad) && GetString(p, end, side.data_name);
  }
  static bool GetRow(const char*& p, const char* end, CompareRow& r) {
    uint8_t verdict = 0, flags = 0;
    uint32_t present = 0;
    if (!GetSide(p, end, r.target) || !GetSide(p, end, r.reference) || !Get(p, end, verdict) ||
        !GetString(p, end, r.message) || !Get(p, end, flags) || !Get(p, end, present))
      return false;
    r.verdict = static_cast<Verdict>(verdict);
    r.compared = flags & 1, r.from_statistics = flags & 2, r.discrete = flags & 4, r.negligible = flags & 8;
    r.output = flags & 16, r.replay = flags & 32, r.read_error = flags & 64;
    for (int i = 0; i < MetricValues::kCount; ++i) {
      if (!(present & (1u << i))) continue;
      double v = 0;
      if (!Get(p, end, v)) return false;
      r.metrics[MetricValues::kNames[i]] = v;
    }
    if (!Get(p, end, r.identical_nonfinite)) return false;
    if (flags & 128) {
      double u = 0;
      if (!Get(p, end, u)) return false;
      r.ulp_threshold = u;
    }
    int64_t top = 0, rop = 0;
    if (!Get(p, end, r.elements) || !Get(p, end, r.mismatched_elements) || !Get(p, end, top) || !Get(p, end, rop))
      return false;
    r.target_op = static_cast<long>(top), r.reference_op = static_cast<long>(rop);
    return true;
  }

  int fd_;
  fs::path dir_;
  std::string buf_;
  uint64_t size_ = 0;  // bytes written to the file
};

Status CompareReport::ForEachRow(const std::function<Status(const CompareRow&)>& fn) const {
  if (spill) return spill->ForEach(fn);
  for (const auto& r : rows) PORTKIT_RETURN_IF_ERROR(fn(r));
  return Status::Ok();
}

namespace {

/// One run of `RunCompare`, split along its passes: Match (read the match keys of both dumps and
/// align them), then Pair (walk both dumps in execution order making the rows of each operator
/// and the tensor pairs to compute), and every batch of rows through Flush (compute the metrics,
/// judge, hand the rows on), then Finish (the culprit and the rest of the report). The members
/// are what the passes share.
class CompareRun {
 public:
  CompareRun(const CompareOptions& options, Context& ctx) : options_(options), ctx_(ctx), log_(ctx.logger) {}
  Expected<CompareReport> Run();

 private:
  Status Match();
  Status CountOps(size_t& target_tensors, size_t& reference_tensors, std::vector<std::string>& warnings);
  Status OpenWindows(size_t target_tensors, size_t reference_tensors);
  Status Pair();
  Status PairOperator(long ti, long ri);
  void TensorRow(const DumpOp& top, long ti, const DumpTensor& tt, const DumpOp& aligned, size_t rpos,
                 const DumpOp& replay_source, size_t replay_pos, const std::string& replay_problem);
  void PendingRow(size_t tpos, const DumpTensor& tt, const DumpTensor& rt, size_t rop_pos, const std::string& rkey,
                  const fs::path& tpath, const fs::path& rpath, CompareRow& row);
  Status ReadGap(size_t t0, size_t t1, size_t r0, size_t r1);
  Status UnmatchedOp(CompareOp op, bool target);
  struct GapOp {
    CompareOp op;
    std::vector<std::vector<int64_t>> outputs;  ///< output shapes
  };
  static GapOp GapOpOf(const DumpOp& op);
  Status ShapeChangeRow(GapOp& top, GapOp& rop);
  Status Flush(bool last);
  Status MaybeFlush() { return rows_.size() >= kBatchRows ? Flush(false) : Status::Ok(); }
  void TrimSometimes() {
    if (++since_trim_ == 4096) TrimHeap(), since_trim_ = 0;
  }
  const std::string* Mapped(const DumpOp& op) const {
    auto it = mapping_.find(op.name);
    return it != mapping_.end() ? &it->second : nullptr;
  }
  bool ReplayedTarget() const { return report_.replay_ok + report_.replay_skipped > 0; }
  void Finish();

  const CompareOptions& options_;
  Context& ctx_;
  Logger& log_;
  CompareReport report_;
  std::map<std::string, std::string> mapping_;
  bool with_shapes_ = false;
  std::vector<std::string> tkeys_, rkeys_;
  std::map<int64_t, size_t> ref_position_;  // manifest index → position, for replayed outputs
  std::vector<std::pair<long, long>> pairs_;
  // What outlives the operators: each one's tensor file (for the workers) and the matched target
  // operators' names, by position (for the first divergence).
  FileNames tfiles_, rfiles_;
  std::vector<std::pair<size_t, CompareOp>> target_ops_;
  size_t target_read_ = 0, next_pair_ = 0;
  std::map<std::pair<std::string, std::string>, size_t> tseen_, rseen_;
  std::optional<OpWindow> tgt_, ref_;
  std::shared_ptr<RowSpill> spill_;
  /// The operators of each dump for the msprobe layout (CompareReport::target_msprobe_ops), and
  /// the first error of appending to them.
  std::shared_ptr<OpSpill> tops_, rops_;
  Status ops_status_ = Status::Ok();
  std::vector<CompareRow> rows_;
  std::vector<PendingPair> pending_;
  size_t rows_before_ = 0;  // rows of the batches handed on
  DivergenceFinder divergence_;
  std::optional<BatchComputer> computer_;
  std::optional<FileCache> header_cache_t_, header_cache_r_;
  size_t dtype_contradictions_ = 0;
  size_t next_t_ = 0, next_r_ = 0, since_trim_ = 0;
};

std::string Label(const DumpOp& op, const std::string& key) {
  return op.name + "." + op.phase + "." + std::to_string(op.index) + "." + key;
}

void SetReadError(CompareRow& row, std::string message) {
  row.read_error = true;
  row.message = std::move(message);
}

std::string ShapesText(const std::vector<std::vector<int64_t>>& shapes) {
  std::string s;
  for (const auto& x : shapes) s += (s.empty() ? "" : ", ") + ShapeText(x);
  return s.empty() ? std::string("no outputs") : s;
}

// First pass, one operator at a time: the matching keys (target names renamed through the
// mapping), the replay facts and the operator counts; nothing else of the dumps is kept.
Status CompareRun::CountOps(size_t& target_tensors, size_t& reference_tensors, std::vector<std::string>& warnings) {
  for (int side = 0; side < 2; ++side) {
    const bool target = side == 0;
    auto reader = DumpReader::Open(target ? options_.target : options_.reference, options_.max_call_bytes);
    if (!reader.ok()) return reader.status();
    for (DumpOp op;;) {
      auto more = reader->Next(op);
      if (!more.ok()) return more.status();
      if (!*more) break;
      (target ? target_tensors : reference_tensors) += op.tensors.size();
      if (target) {
        tkeys_.push_back(OpMatchKey(op, with_shapes_, Mapped(op)));
        if (op.replay_status == "ok") ++report_.replay_ok;
        else if (!op.replay_status.empty()) ++report_.replay_skipped;
      } else {
        if (ReplayedTarget()) ref_position_[op.index] = rkeys_.size();
        rkeys_.push_back(OpMatchKey(op, with_shapes_));
      }
    }
    warnings[static_cast<size_t>(side)] = reader->warning();
  }
  return Status::Ok();
}

Status CompareRun::Match() {
  if (!options_.mapping.empty()) {
    auto m = LoadMapping(options_.mapping);
    if (!m.ok()) return m.status();
    mapping_ = std::move(*m);
  }
  with_shapes_ = options_.match == MatchKey::kNameAndShape;
  std::vector<std::string> warnings(2);
  size_t target_tensors = 0, reference_tensors = 0;
  PORTKIT_RETURN_IF_ERROR(CountOps(target_tensors, reference_tensors, warnings));
  for (int side : {1, 0})  // the reference's first, as they were
    if (!warnings[static_cast<size_t>(side)].empty()) report_.warnings.push_back(warnings[static_cast<size_t>(side)]);
  report_.target_ops = tkeys_.size();
  report_.reference_ops = rkeys_.size();
  // A dump without a single operator is no run to judge (a dumper that never ran, a manifest
  // emptied by a crash, a dump.json whose calls all lack an API name): saying "no diverging
  // operator" about it would pass a gate on nothing. The same for either side.
  for (int side : {1, 0}) {
    if ((side == 0 ? report_.target_ops : report_.reference_ops) > 0) continue;
    const fs::path& dir = side == 0 ? options_.target : options_.reference;
    const std::string& why = warnings[static_cast<size_t>(side)];
    return ParseError(dir.string() + ": the " + (side == 0 ? "target" : "reference") + " dump has no operators (" +
                      (IsMsprobeDump(dir) ? "dump.json's \"data\" holds no API or module call"
                                          : "manifest.jsonl holds no operator record") +
                      "); nothing to compare" + (why.empty() ? "" : " (" + why + ")"));
  }
  AlignStats align_stats;
  pairs_ = AlignKeys(tkeys_, rkeys_, &align_stats, options_.align_budget > 0 ? options_.align_budget : kAlignBudget);
  std::vector<std::string>().swap(tkeys_), std::vector<std::string>().swap(rkeys_);  // not needed any more
  report_.unaligned_target_ops = align_stats.unaligned_target;
  report_.unaligned_reference_ops = align_stats.unaligned_reference;
  if (align_stats.unaligned_target + align_stats.unaligned_reference > 0)
    report_.warnings.push_back(
        "the runs differ too much to align exactly within the work bound: " +
        std::to_string(align_stats.unaligned_target) + " target and " +
        std::to_string(align_stats.unaligned_reference) +
        " reference operators in the most different regions were left unmatched (listed as such)");
  report_.matched_ops = pairs_.size();
  report_.renames = mapping_.size();
  log_.Info("Matched " + std::to_string(pairs_.size()) + " operators (target " + std::to_string(report_.target_ops) +
            ", reference " + std::to_string(report_.reference_ops) + ", key " +
            std::string(MatchKeyName(options_.match)) +
            (mapping_.empty() ? "" : ", " + std::to_string(mapping_.size()) + " renames") + ").");
  return OpenWindows(target_tensors, reference_tensors);
}

// Second pass set-up: the rows are built walking both dumps in execution order; each operator is
// read when reached and dropped once behind (a replayed target may pair with any reference
// operator, so the reference's are kept then). For the msprobe layout, msprobe-style call names
// (`Functional.linear.0.forward`; a portkit operator gets its name, its occurrence in its phase
// and the phase) are copied as the operators are read.
Status CompareRun::OpenWindows(size_t target_tensors, size_t reference_tensors) {
  // Only a matched target operator can be the first divergence (the rows of the others are
  // Unmatched): its names are kept by position, the others' not at all.
  target_ops_.reserve(pairs_.size());
  report_.unmatched_target_ops.reserve(report_.target_ops - pairs_.size());
  report_.unmatched_reference_ops.reserve(report_.reference_ops - pairs_.size());
  if (options_.msprobe_names) {
    report_.target_calls.reserve(report_.target_ops), report_.reference_calls.reserve(report_.reference_ops);
    report_.target_stacks.reserve(report_.target_ops);
  }
  auto call_of = [](const DumpOp& op, std::map<std::pair<std::string, std::string>, size_t>& seen) {
    return !op.call.empty() ? op.call : op.name + "." + std::to_string(seen[{op.name, op.phase}]++) + "." + op.phase;
  };
  auto topen = DumpReader::Open(options_.target, options_.max_call_bytes);
  if (!topen.ok()) return topen.status();
  auto ropen = DumpReader::Open(options_.reference, options_.max_call_bytes);
  if (!ropen.ok()) return ropen.status();
  tgt_.emplace(std::move(*topen), report_.target_ops, [this, call_of](const DumpOp& op) {
    tfiles_.Add(op.file);
    while (next_pair_ < pairs_.size() && static_cast<size_t>(pairs_[next_pair_].first) < target_read_) ++next_pair_;
    if (next_pair_ < pairs_.size() && static_cast<size_t>(pairs_[next_pair_].first) == target_read_)
      target_ops_.emplace_back(target_read_, OpOf(op));
    ++target_read_;
    report_.target_forward.push_back(op.forward);
    if (options_.msprobe_names) {
      report_.target_calls.push_back(call_of(op, tseen_));
      report_.target_stacks.push_back(op.stack);
      if (tops_ && ops_status_.ok()) ops_status_ = tops_->Append(op);
    }
  });
  ref_.emplace(std::move(*ropen), report_.reference_ops, [this, call_of](const DumpOp& op) {
    rfiles_.Add(op.file);
    if (options_.msprobe_names) {
      report_.reference_calls.push_back(call_of(op, rseen_));
      if (rops_ && ops_status_.ok()) ops_status_ = rops_->Append(op);
    }
  });
  // The rows are made, computed, judged and handed on a batch at a time (kBatchRows, ending where
  // an operator's rows end): to the spill file when there is one, else to report.rows. Room for
  // every row at once when they are all kept (an upper bound: untouched capacity costs address
  // space, not memory), so 200k rows are not copied while the vector grows.
  if (!options_.spill_dir.empty()) {
    auto created = RowSpill::Create(options_.spill_dir);
    if (!created.ok()) return created.status();
    spill_ = std::move(*created);
  } else {
    report_.rows.reserve(report_.target_ops + report_.reference_ops + target_tensors + reference_tensors);
  }
  if (options_.msprobe_names) {  // beside the rows (or in memory with them)
    auto tops = OpSpill::Create(options_.spill_dir);
    if (!tops.ok()) return tops.status();
    auto rops = OpSpill::Create(options_.spill_dir);
    if (!rops.ok()) return rops.status();
    tops_ = std::move(*tops), rops_ = std::move(*rops);
  }
  computer_.emplace(options_, ctx_, tfiles_, rfiles_);
  const TensorLimits tensor_limits{options_.max_view_elements};
  header_cache_t_.emplace(tensor_limits), header_cache_r_.emplace(tensor_limits);
  return Status::Ok();
}

// Computes, judges and hands on the rows made so far.
Status CompareRun::Flush(bool last) {
  PORTKIT_RETURN_IF_ERROR(computer_->Run(rows_, pending_, last));
  report_.tensor_pairs_compared += computer_->compared();
  JudgeInContext(rows_);
  divergence_.Feed(rows_);
  for (size_t i = 0; i < rows_.size(); ++i) {
    ++report_.verdict_counts[std::string(VerdictName(rows_[i].verdict))];
    if (!rows_[i].read_error) continue;
    if (report_.read_errors.empty())
      report_.first_read_error_name = rows_[i].target.name.empty() ? rows_[i].reference.name : rows_[i].target.name;
    report_.read_errors.emplace_back(rows_before_ + i, rows_[i].message);
  }
  rows_before_ += rows_.size();
  if (spill_) {
    for (const auto& r : rows_) PORTKIT_RETURN_IF_ERROR(spill_->Append(r));
    rows_.clear();
  } else {
    std::move(rows_.begin(), rows_.end(), std::back_inserter(report_.rows));
    std::vector<CompareRow>().swap(rows_);
  }
  pending_.clear();
  return Status::Ok();
}

// An operator of one run with no counterpart in the other: one row.
Status CompareRun::UnmatchedOp(CompareOp op, bool target) {
  CompareRow row;
  (target ? row.target : row.reference).name = op.name + "." + op.phase + "." + std::to_string(op.index) + ".*";
  row.verdict = Verdict::kUnmatched;
  row.message = target ? "no matching operator in the reference" : "no matching operator in the target";
  rows_.push_back(std::move(row));
  (target ? report_.unmatched_target_ops : report_.unmatched_reference_ops).push_back(std::move(op));
  return MaybeFlush();
}

// What the rows of an operator without a counterpart need of it: no tensors, no statistics.
CompareRun::GapOp CompareRun::GapOpOf(const DumpOp& op) {
  GapOp g{OpOf(op), {}};
  for (const auto& t : op.tensors)
    if (IsOutputKey(t.key)) g.outputs.push_back(t.shape);
  return g;
}

// The same operator (name and phase) with other output shapes: one row naming both.
Status CompareRun::ShapeChangeRow(GapOp& top, GapOp& rop) {
  CompareRow row;
  row.target.name = top.op.name + "." + top.op.phase + "." + std::to_string(top.op.index) + ".*";
  row.reference.name = rop.op.name + "." + rop.op.phase + "." + std::to_string(rop.op.index) + ".*";
  if (!top.outputs.empty()) row.target.shape = top.outputs.front();
  if (!rop.outputs.empty()) row.reference.shape = rop.outputs.front();
  row.verdict = Verdict::kUnmatched;
  row.message = "output shape changed: " + ShapesText(top.outputs) + " in the target, " + ShapesText(rop.outputs) +
                " in the reference";
  rows_.push_back(std::move(row));
  report_.shape_changes.push_back(
      ShapeChange{std::move(top.op), std::move(rop.op), std::move(top.outputs), std::move(rop.outputs)});
  return MaybeFlush();
}

// Reads the operators between two matched ones and makes their rows, one operator after another,
// each dropped from the window once read (a 300k-call dump.json against a small one is never held
// whole). With name+shape matching, the operators of such a gap with the same name and phase on
// both sides are shape changes: then what the rows need of each (GapOp, no tensors) is kept until
// the gap is aligned by name. Rows in execution order: the target's operators without counterpart
// before the reference's, up to each shape change.
Status CompareRun::ReadGap(size_t t0, size_t t1, size_t r0, size_t r1) {
  const bool replayed_target = ReplayedTarget();
  if (!(with_shapes_ && t0 < t1 && r0 < r1)) {
    for (size_t t = t0; t < t1; ++t) {
      PORTKIT_RETURN_IF_ERROR(tgt_->ReadTo(t));
      PORTKIT_RETURN_IF_ERROR(UnmatchedOp(OpOf(tgt_->At(t)), true));
      tgt_->ReleaseBefore(t + 1);
      TrimSometimes();
    }
    for (size_t r = r0; r < r1; ++r) {
      PORTKIT_RETURN_IF_ERROR(ref_->ReadTo(r));
      PORTKIT_RETURN_IF_ERROR(UnmatchedOp(OpOf(ref_->At(r)), false));
      if (!replayed_target) ref_->ReleaseBefore(r + 1);  // a replayed target may pair with any of them
      TrimSometimes();
    }
    return Status::Ok();
  }
  std::vector<GapOp> tops, rops;
  std::vector<std::string> tn, rn;
  // Sized once: a gap of 300k operators grown by doubling would hold half again as much.
  tops.reserve(t1 - t0), tn.reserve(t1 - t0), rops.reserve(r1 - r0), rn.reserve(r1 - r0);
  for (size_t t = t0; t < t1; ++t) {
    PORTKIT_RETURN_IF_ERROR(tgt_->ReadTo(t));
    const DumpOp& op = tgt_->At(t);
    tn.push_back(OpMatchKey(op, false, Mapped(op)));
    tops.push_back(GapOpOf(op));
    tgt_->ReleaseBefore(t + 1);
    TrimSometimes();
  }
  for (size_t r = r0; r < r1; ++r) {
    PORTKIT_RETURN_IF_ERROR(ref_->ReadTo(r));
    const DumpOp& op = ref_->At(r);
    rn.push_back(OpMatchKey(op, false));
    rops.push_back(GapOpOf(op));
    if (!replayed_target) ref_->ReleaseBefore(r + 1);
    TrimSometimes();
  }
  const std::vector<std::pair<long, long>> same_name = AlignKeys(tn, rn);
  std::vector<std::string>().swap(tn), std::vector<std::string>().swap(rn);
  size_t t = 0, r = 0;
  for (auto [a, b] : same_name) {
    const size_t ta = static_cast<size_t>(a), rb = static_cast<size_t>(b);
    for (; t < ta; ++t) PORTKIT_RETURN_IF_ERROR(UnmatchedOp(std::move(tops[t].op), true));
    for (; r < rb; ++r) PORTKIT_RETURN_IF_ERROR(UnmatchedOp(std::move(rops[r].op), false));
    PORTKIT_RETURN_IF_ERROR(ShapeChangeRow(tops[ta], rops[rb]));
    t = ta + 1, r = rb + 1;
  }
  for (; t < tops.size(); ++t) PORTKIT_RETURN_IF_ERROR(UnmatchedOp(std::move(tops[t].op), true));
  for (; r < rops.size(); ++r) PORTKIT_RETURN_IF_ERROR(UnmatchedOp(std::move(rops[r].op), false));
  return Status::Ok();
}

// A pair whose data files are readable: its element types checked against the manifests, and
// queued for the compute pass.
void CompareRun::PendingRow(size_t tpos, const DumpTensor& tt, const DumpTensor& rt, size_t rop_pos,
                            const std::string& rkey, const fs::path& tpath, const fs::path& rpath, CompareRow& row) {
  auto tf = header_cache_t_->Get(tpath);
  auto rf = header_cache_r_->Get(rpath);
  if (!tf.ok() || !rf.ok()) {
    SetReadError(row, !tf.ok() ? tf.status().message() : rf.status().message());
    return;
  }
  const TensorInfo* ta = (*tf)->Find(tt.key);
  const TensorInfo* ra = (*rf)->Find(rkey);
  // The data file's element type against the manifest's: a contradiction is named in the
  // row and in a warning, never left to an unexplained N/A.
  const std::string contradiction = ta && ra
                                        ? JoinNotes(DTypeContradiction(tt.dtype, *ta, **tf, tpath, tfiles_[tpos]),
                                                    DTypeContradiction(rt.dtype, *ra, **rf, rpath, rfiles_[rop_pos]))
                                        : std::string();
  if (!contradiction.empty() && dtype_contradictions_++ < kMaxDTypeWarnings) report_.warnings.push_back(contradiction);
  if (!ta || !ra || ta->numel() != ra->numel()) {
    SetReadError(row, "tensor data missing or of another size");
  } else if (DTypeSize(ta->dtype) == 0 || DTypeSize(ra->dtype) == 0) {
    row.verdict = Verdict::kNotApplicable;
    row.message = contradiction.empty() ? "not compared: the tensor file's element type is not supported"
                                        : contradiction;  // "FILE: holds ... data, ...; not compared"
  } else {
    row.message = contradiction;
    PendingPair p;
    p.row = rows_.size();
    p.top = static_cast<uint32_t>(tpos), p.rop = static_cast<uint32_t>(rop_pos);
    p.tkey_len = static_cast<uint32_t>(tt.key.size()), p.rkey_len = static_cast<uint32_t>(rkey.size());
    p.tdtype = ta->dtype, p.rdtype = ra->dtype;
    p.numel = ta->numel();
    pending_.push_back(std::move(p));
  }
}

// The row of one tensor of a matched target operator (a replayed output is paired with the
// operator it was replayed from).
void CompareRun::TensorRow(const DumpOp& top, long ti, const DumpTensor& tt, const DumpOp& aligned, size_t rpos,
                           const DumpOp& replay_source, size_t replay_pos, const std::string& replay_problem) {
  const size_t tpos = static_cast<size_t>(ti);
  CompareRow row;
  row.target_op = ti;
  row.replay = IsReplayKey(tt.key);
  // `replay.output.N` and its baseline `replay.baseline.output.N` pair with the reference's `output.N`.
  std::string rkey = !row.replay ? tt.key : tt.key.substr(tt.key.rfind("replay.baseline.", 0) == 0 ? 16 : 7);
  row.output = IsOutputKey(rkey);
  const DumpOp& rop = row.replay ? replay_source : aligned;
  const size_t rop_pos = row.replay ? replay_pos : rpos;
  auto rit = std::find_if(rop.tensors.begin(), rop.tensors.end(), [&](const DumpTensor& x) { return x.key == rkey; });
  row.target = {Label(top, tt.key), tt.dtype, tt.shape, std::nullopt, tt.requires_grad, tt.data_name};
  if (rit != rop.tensors.end()) {
    row.reference = {Label(rop, rit->key), rit->dtype, rit->shape, std::nullopt, rit->requires_grad, rit->data_name};
    row.reference_op = static_cast<long>(rop_pos);
  }
  row.verdict = Verdict::kUnmatched;
  if (row.replay && !replay_problem.empty()) {
    row.message = replay_problem;
  } else if (rit == rop.tensors.end()) {
    row.message = "no tensor " + rkey + " in the reference op";
  } else if (rit->shape != tt.shape) {
    row.message =
        "shape mismatch: " + ShapeText(tt.shape) + " in the target, " + ShapeText(rit->shape) + " in the reference";
  } else if (!tt.note.empty() || !rit->note.empty() || Unsupported(tt.dtype) || Unsupported(rit->dtype)) {
    row.verdict = Verdict::kNotApplicable;
    row.message = "not compared: " +
                  (!tt.note.empty() ? tt.note + " (target)"
                   : !rit->note.empty()
                       ? rit->note + " (reference)"
                       : "element type " + (Unsupported(tt.dtype) ? tt.dtype : rit->dtype) + " is not supported");
  } else if (auto tpath = TensorDataPath(options_.target, tfiles_[tpos], tt.data_name),
             rpath = TensorDataPath(options_.reference, rfiles_[rop_pos], rit->data_name);
             !tpath.ok() || !rpath.ok()) {
    SetReadError(row, !tpath.ok() ? tpath.status().message() : rpath.status().message());
  } else if (tpath->empty() || rpath->empty()) {
    StatsOnlyRow(tt, *rit, row);
  } else {
    PendingRow(tpos, tt, *rit, rop_pos, rkey, *tpath, *rpath, row);
  }
  rows_.push_back(std::move(row));
}

// The rows of one matched pair of operators.
Status CompareRun::PairOperator(long ti, long ri) {
  const size_t tpos = static_cast<size_t>(ti), rpos = static_cast<size_t>(ri);
  PORTKIT_RETURN_IF_ERROR(ReadGap(next_t_, tpos, next_r_, rpos));
  PORTKIT_RETURN_IF_ERROR(tgt_->ReadTo(tpos));
  PORTKIT_RETURN_IF_ERROR(ref_->ReadTo(rpos));
  next_t_ = tpos + 1, next_r_ = rpos + 1;
  const DumpOp& top = tgt_->At(tpos);
  const DumpOp& aligned = ref_->At(rpos);
  // Replayed outputs were computed from the inputs of the reference op the dumper paired them
  // with (same name and phase, same occurrence), which alignment may not have chosen.
  const DumpOp* replay_source = &aligned;
  size_t replay_pos = rpos;
  std::string replay_problem;
  if (top.replay_reference >= 0) {
    auto it = ref_position_.find(top.replay_reference);
    if (it == ref_position_.end()) {
      replay_problem = "replayed from reference op #" + std::to_string(top.replay_reference) +
                       ", which this reference dump does not have (another load_file_path?)";
    } else {
      PORTKIT_RETURN_IF_ERROR(ref_->ReadTo(it->second));
      const DumpOp& source = ref_->At(it->second);
      if (source.name != aligned.name || source.phase != aligned.phase) {
        replay_problem = "replayed from reference op #" + std::to_string(top.replay_reference) + " (" + source.name +
                         "), not this operator: another load_file_path?";
      } else {
        replay_source = &source, replay_pos = it->second;
      }
    }
  }
  std::set<std::string> target_keys;
  for (const auto& tt : top.tensors) {
    target_keys.insert(tt.key);
    TensorRow(top, ti, tt, aligned, rpos, *replay_source, replay_pos, replay_problem);
  }
  // Tensors that only the reference op has (an output the target did not produce).
  for (const auto& rt : aligned.tensors) {
    if (target_keys.count(rt.key)) continue;
    CompareRow row;
    row.target_op = ti;
    row.output = IsOutputKey(rt.key);
    row.reference = {Label(aligned, rt.key), rt.dtype, rt.shape, std::nullopt, rt.requires_grad, rt.data_name};
    row.reference_op = ri;
    row.verdict = Verdict::kUnmatched;
    row.message = "no tensor " + rt.key + " in the target op";
    rows_.push_back(std::move(row));
  }
  // Operators behind us are done with: dropped, and every few thousand the heap trimmed so their
  // memory goes back to the system.
  tgt_->ReleaseBefore(next_t_);
  if (!ReplayedTarget()) ref_->ReleaseBefore(next_r_);
  TrimSometimes();
  return MaybeFlush();
}

Status CompareRun::Pair() {
  for (auto [ti, ri] : pairs_) PORTKIT_RETURN_IF_ERROR(PairOperator(ti, ri));
  if (dtype_contradictions_ > kMaxDTypeWarnings)
    report_.warnings.push_back(std::to_string(dtype_contradictions_) +
                               " tensor pairs in all have a data file whose element type contradicts its manifest "
                               "(the first " +
                               std::to_string(kMaxDTypeWarnings) + " named above; the rows say which)");
  PORTKIT_RETURN_IF_ERROR(ReadGap(next_t_, report_.target_ops, next_r_, report_.reference_ops));
  for (OpWindow* w : {&*tgt_, &*ref_}) PORTKIT_RETURN_IF_ERROR(w->Finish());
  std::map<int64_t, size_t>().swap(ref_position_);
  std::vector<std::pair<long, long>>().swap(pairs_);
  TrimHeap();
  if (ReplayedTarget())
    log_.Info("Replayed operators in the target: " + std::to_string(report_.replay_ok) +
              " (skipped: " + std::to_string(report_.replay_skipped) + ", reasons in its manifest).");
  PORTKIT_RETURN_IF_ERROR(Flush(true));
  if (spill_) {
    PORTKIT_RETURN_IF_ERROR(spill_->Flush());
    report_.spill = std::move(spill_);
  }
  PORTKIT_RETURN_IF_ERROR(ops_status_);
  if (tops_) {
    PORTKIT_RETURN_IF_ERROR(tops_->Flush());
    PORTKIT_RETURN_IF_ERROR(rops_->Flush());
    report_.target_msprobe_ops = std::move(tops_), report_.reference_msprobe_ops = std::move(rops_);
  }
  report_.row_count = rows_before_;
  return Status::Ok();
}

// The culprit and the first mismatching output, named from the matched target operators.
void CompareRun::Finish() {
  Divergence div = divergence_.Finish();
  auto matched_target_op = [&](long position) {
    auto it = std::lower_bound(target_ops_.begin(), target_ops_.end(), static_cast<size_t>(position),
                               [](const std::pair<size_t, CompareOp>& e, size_t p) { return e.first < p; });
    // Rows judged Yes or No belong to matched operators only.
    return it != target_ops_.end() && it->first == static_cast<size_t>(position) ? it->second : CompareOp{};
  };
  if (div.first_local >= 0) {
    report_.first_divergence = matched_target_op(div.first_local);
    report_.first_divergence_basis = div.basis;
    report_.first_divergence_op = div.first_local;
    report_.first_divergence_evidence = div.evidence;
  }
  if (div.first_mismatch >= 0) report_.first_mismatching_output = matched_target_op(div.first_mismatch);
  if (div.first_local >= 0) {
    report_.divergence_state = DivergenceState::kCulprit;
  } else if (div.drift_start >= 0 || div.first_mismatch >= 0) {
    report_.divergence_state = DivergenceState::kDrift;
    const bool growth = div.drift_start >= 0 && (div.first_mismatch < 0 || div.drift_start <= div.first_mismatch);
    report_.drift_start = matched_target_op(growth ? div.drift_start : div.first_mismatch);
    report_.drift_evidence = growth ? div.drift_evidence : "the first output judged No";
  }
  // What is left of the manifests goes now, and its memory back to the system before the caller
  // renders the report.
  std::vector<std::pair<size_t, CompareOp>>().swap(target_ops_);
  tfiles_.Clear(), rfiles_.Clear();
  TrimHeap();
}

Expected<CompareReport> CompareRun::Run() {
  report_.reference = options_.reference.string();
  report_.target = options_.target.string();
  report_.match = options_.match;
  PORTKIT_RETURN_IF_ERROR(Match());
  PORTKIT_RETURN_IF_ERROR(Pair());
  Finish();
  return std::move(report_);
}

}  // namespace

Expected<CompareReport> RunCompare(const CompareOptions& options, Context& ctx) {
  return CompareRun(options, ctx).Run();
}

}  // namespace portkit::accuracy
