/// tune_bench: what `portkit tune` buys on this machine, and how fast each strategy finds it.
///
/// Part 1, kernels: at shapes from real models (a BERT-base linear layer, ResNet-50 conv
/// layers, batch 1), tunes our GEMM / Conv2D template (bandit strategy, --max-evals candidates,
/// real compiles through the kernel cache) and then times, in this process and with one timing
/// routine, interleaved so all three see the same load on a shared machine (warm-up, then the
/// median of --repeats rounds): our untuned default, our tuned kernel, and OpenBLAS (cblas_sgemm; conv as im2col +
/// sgemm per group), bias included in all three. Prints GFLOP/s and the ratios tuned/OpenBLAS and tuned/default.
///
/// Part 2, strategies: on recorded exhaustive landscapes (replay, no compiling), the number of
/// evaluations each strategy needs to come within 5% of the landscape's optimum, over --seeds
/// seeds, beside random search.
///
/// --threads N pins our THREADS knob and OpenBLAS to N threads (a load-robust comparison on a
/// shared machine).
///
/// Part 3, search quality: on the same landscapes, at the command line's default budget (or
/// --quality-evals/--quality-patience/--quality-batch), the distribution over --quality-seeds
/// seeds of best found / optimum per strategy: share of seeds within 5 %, percentiles, worst.
///
/// Usage: tune_bench [--max-evals N] [--repeats N] [--seeds N] [--only gemm|conv|strategies|quality]
///                   [--threads N] [--landscape FILE]... (default: tests/data/tune/landscape_small.jsonl and
///                   tests/data/tune/landscape_bert_ffn_in_128x768x3072.jsonl) [--quality-evals N]
///                   [--quality-patience N] [--quality-batch N] [--quality-seeds N] [--quality-strategy NAME]
#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/atomic_file.h"
#include "core/log.h"
#include "core/table.h"
#include "tune/builder.h"
#include "tune/knowledge_base.h"
#include "tune/landscape.h"
#include "tune/operators/conv2d/conv2d_op.h"
#include "tune/operators/gemm/gemm_op.h"
#include "tune/operators/gemm/gemm_space.h"
#include "tune/runner.h"
#include "tune/search_quality.h"
#include "tune/strategies/strategy.h"
#include "tune/tuner.h"

using namespace portkit;
using namespace portkit::tune;

namespace {

using KernelFn = void (*)(const float* const*, float*, const long*);

// Times several functions interleaved (f0, f1, f2, f0, f1, ...) so that all see the same load
// on a shared machine, with a pause after each block: calibration so a repeat lasts >= 2 ms, a warm-up, then `repeats`
// rounds; the median per call of each.
std::vector<double> MedianUsInterleaved(const std::vector<std::function<void()>>& fns, int repeats) {
  auto t = [] { return std::chrono::steady_clock::now(); };
  std::vector<int> inner;
  for (const auto& fn : fns) {
    fn();  // first touch
    auto s = t();
    int calls = 0;
    do {
      fn();
      ++calls;
    } while (std::chrono::duration<double, std::micro>(t() - s).count() < 20000 && calls < 1000);
    double per = std::chrono::duration<double, std::micro>(t() - s).count() / calls;
    inner.push_back(std::max(1, static_cast<int>(2000 / std::max(per, 1e-3))));
  }
  std::vector<std::vector<double>> v(fns.size());
  for (int r = 0; r < repeats; ++r)
    for (size_t f = 0; f < fns.size(); ++f) {
      auto a = t();
      for (int i = 0; i < inner[f]; ++i) fns[f]();
      v[f].push_back(std::chrono::duration<double, std::micro>(t() - a).count() / inner[f]);
      // OpenBLAS worker threads spin for a while after a call; let them go to sleep so they do
      // not take the cores from whatever is timed next.
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
  std::vector<double> out;
  for (auto& x : v) {
    std::sort(x.begin(), x.end());
    out.push_back(x[x.size() / 2]);
  }
  return out;
}

KernelFn LoadKernel(const std::filesystem::path& so) {
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "dlopen %s: %s\n", so.c_str(), dlerror());
    return nullptr;
  }
  return reinterpret_cast<KernelFn>(dlsym(h, "portkit_kernel"));
}

// OpenBLAS peer: C = bias; C += A * B (row-major).
void BlasGemm(const Workload& w, float* out) {
  long m = w.dims[0], n = w.dims[1], k = w.dims[2];
  const float* bias = w.inputs[2].empty() ? nullptr : w.inputs[2].data();
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) out[i * n + j] = bias ? bias[j] : 0.f;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.f, w.inputs[0].data(), static_cast<int>(k), w.inputs[1].data(), static_cast<int>(n), 1.f, out,
              static_cast<int>(n));
}

// OpenBLAS peer for Conv2D: im2col (skipped for 1x1 stride-1 unpadded) + sgemm per image/group.
void BlasConv(const Workload& w, std::vector<float>& col, float* out) {
  const long* d = w.dims.data();
  long N = d[0], C = d[1], H = d[2], W = d[3], O = d[4], KH = d[5], KW = d[6], SH = d[7], SW = d[8], PH = d[9],
       PW = d[10], G = d[11], OH = d[12], OW = d[13];
  long cg = C / G, og = O / G, kdim = cg * KH * KW, ndim = OH * OW;
  bool direct = KH == 1 && KW == 1 && SH == 1 && SW == 1 && PH == 0 && PW == 0;
  col.resize(static_cast<size_t>(kdim * ndim));
  const float* x = w.inputs[0].data();
  const float* bias = w.inputs[2].empty() ? nullptr : w.inputs[2].data();
  for (long n = 0; n < N; ++n)
    for (long g = 0; g < G; ++g) {
      const float* xg = x + (n * C + g * cg) * H * W;
      const float* b = xg;
      if (!direct) {
        float* dst = col.data();
        for (long c = 0; c < cg; ++c)
          for (long kh = 0; kh < KH; ++kh)
            for (long kw = 0; kw < KW; ++kw, dst += ndim)
              for (long oh = 0; oh < OH; ++oh) {
                long ih = oh * SH - PH + kh;
                for (long ow = 0; ow < OW; ++ow) {
                  long iw = ow * SW - PW + kw;
                  dst[oh * OW + ow] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? xg[c * H * W + ih * W + iw] : 0.f;
                }
              }
        b = col.data();
      }
      float* y = out + (n * O + g * og) * ndim;
      for (long o = 0; o < og; ++o)
        for (long i = 0; i < ndim; ++i) y[o * ndim + i] = bias ? bias[g * og + o] : 0.f;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(og), static_cast<int>(ndim),
                  static_cast<int>(kdim), 1.f, w.inputs[1].data() + g * og * kdim, static_cast<int>(kdim), b,
                  static_cast<int>(ndim), 1.f, y, static_cast<int>(ndim));
    }
}

std::string F(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

OpDesc Gemm(const char* name, long m, long k, long n) {
  OpDesc d;
  d.name = name;
  d.type = "MatMul";
  d.layout = "ND";
  d.inputs = {{m, k}, {k, n}};
  d.bias = true;
  return d;
}

OpDesc Conv(const char* name, long c, long hw, long o, long kk, long s, long p) {
  OpDesc d;
  d.name = name;
  d.type = "Conv2D";
  d.layout = "NCHW";
  d.inputs = {{1, c, hw, hw}, {o, c, kk, kk}};
  d.stride[0] = d.stride[1] = s;
  d.padding[0] = d.padding[1] = p;
  d.bias = false;  // ResNet convolutions are followed by batch norm
  return d;
}

int Kernels(const std::vector<OpDesc>& ops, int max_evals, int repeats, int pin_threads, Logger& log) {
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  BuildOptions bo;
  bo.cache_dir = BankDir("") / "kernels";
  bo.parallel = threads;
  Builder builder(bo, log);
  std::vector<std::vector<std::string>> rows;
  std::vector<double> gemm_ratios, conv_ratios;
  for (const auto& d : ops) {
    auto op = MakeOperator(d);
    if (!op.ok()) return 1;
    SearchSpace space = (*op)->Space(threads);
    if (pin_threads > 0) (void)space.Restrict("THREADS", {pin_threads});
    Config def = (*op)->DefaultConfig(space, threads);
    MeasureOptions mo;
    mo.repeats = 5;
    CompileEvaluator evaluator(**op, space, builder, mo, nullptr, log);
    auto strategy = MakeStrategy("bandit", {});
    (*strategy)->Initialise(space, def, 7);
    Budget b;
    b.max_evals = max_evals;
    b.batch = threads;
    auto t0 = std::chrono::steady_clock::now();
    TuneOutcome out = TuneOperator(space, def, std::nullopt, **strategy, evaluator, b, log, d.name, [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    auto builds = builder.BuildAll({(*op)->Source(space, def), (*op)->Source(space, out.best)});
    KernelFn f_def = LoadKernel(builds[0].shared_object), f_best = LoadKernel(builds[1].shared_object);
    if (!f_def || !f_best) return 1;
    Workload w = (*op)->MakeWorkload();
    std::vector<const float*> in;
    for (const auto& v : w.inputs) in.push_back(v.empty() ? nullptr : v.data());
    std::vector<float> out_buf(w.output_size), col;
    std::vector<float> blas_out(w.output_size);
    auto us = MedianUsInterleaved(
        {[&] { f_def(in.data(), out_buf.data(), w.dims.data()); },
         [&] { f_best(in.data(), out_buf.data(), w.dims.data()); },
         [&] { d.type == "MatMul" ? BlasGemm(w, blas_out.data()) : BlasConv(w, col, blas_out.data()); }},
        repeats);
    double us_def = us[0], us_best = us[1], us_blas = us[2];
    // The peer must compute the same thing.
    out_buf = blas_out;
    double max_err = 0;
    for (size_t i = 0; i < out_buf.size(); ++i)
      max_err = std::max(max_err, std::fabs(double(out_buf[i]) - w.reference[i]));
    double gf = (*op)->Flops() / 1e3;  // GFLOP/s = flops / us / 1e3
    double ratio_blas = us_blas / us_best;
    (d.type == "MatMul" ? gemm_ratios : conv_ratios).push_back(ratio_blas);
    rows.push_back({d.name, Signature(d).substr(0, Signature(d).find("|bias")), F("%.1f", gf / us_def),
                    F("%.1f", gf / us_best), F("%.1f", gf / us_blas), F("%.2f", ratio_blas),
                    F("%.2f", us_def / us_best), std::to_string(out.evaluations), F("%.1e", max_err),
                    space.Key(out.best)});
    std::fprintf(stderr, "%s done\n", d.name.c_str());
  }
  std::string table = RenderTable({"op", "shape", "default GF/s", "tuned GF/s", "OpenBLAS GF/s", "tuned/OpenBLAS",
                                   "tuned/default", "evals", "peer max err", "tuned strategy"},
                                  rows);
  std::fwrite(table.data(), 1, table.size(), stdout);
  auto geo = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += std::log(x);
    return v.empty() ? 0.0 : std::exp(s / v.size());
  };
  if (!gemm_ratios.empty()) std::printf("GEMM tuned/OpenBLAS (geomean): %.2f (goal >= 0.70)\n", geo(gemm_ratios));
  if (!conv_ratios.empty()) std::printf("Conv2D tuned/OpenBLAS im2col+sgemm (geomean): %.2f\n", geo(conv_ratios));
  return 0;
}

// A recorded landscape file, read and parsed (the error names the file).
auto LoadLandscape(const std::string& file) -> decltype(ParseLandscape(std::string(), file)) {
  auto text = ReadFile(file);
  if (!text.ok()) return text.status();
  return ParseLandscape(*text, file);
}

int Strategies(const std::vector<std::string>& files, int seeds) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& file : files) {
    auto l = LoadLandscape(file);
    if (!l.ok()) {
      std::fprintf(stderr, "%s\n", l.status().message().c_str());
      return 1;
    }
    int cores = 1;
    if (auto at = l->validators.find("cores="); at != std::string::npos)
      cores = std::atoi(l->validators.c_str() + at + 6);
    for (const auto& op : l->ops) {
      const auto& points = l->points.at(Signature(op));
      SearchSpace space = GemmSpace(cores);
      for (const auto& f : l->fixes) (void)ApplyFix(space, f);
      std::set<std::string> keys;
      double optimum = kRejected;
      for (const auto& [k, p] : points) {
        keys.insert(k);
        if (p.status == "ok") optimum = std::min(optimum, p.time_us);
      }
      space.AllowOnly(keys);
      Config start = GemmDefault(space, cores);
      double target = optimum * 1.05;
      double random_mean = 0;
      for (const auto& info : AllStrategies()) {
        std::vector<int> needed;
        int seeds_here = info.name == "exhaustive" ? 1 : seeds;
        for (int s = 0; s < seeds_here; ++s) {
          auto strategy = MakeStrategy(info.name, {});
          (*strategy)->Initialise(space, start, static_cast<uint64_t>(s) * 7919 + 1);
          ReplayEvaluator ev(space, points);
          Budget b;
          b.max_evals = static_cast<int>(points.size());
          Logger quiet(nullptr, SystemClock());
          TuneOutcome out = TuneOperator(space, start, std::nullopt, **strategy, ev, b, quiet, "", [] { return 0.0; });
          int n = static_cast<int>(points.size());
          double best = points.count(space.Key(start)) && points.at(space.Key(start)).status == "ok"
                            ? points.at(space.Key(start)).time_us
                            : kRejected;
          if (best <= target) n = 0;
          for (size_t i = 0; i < out.history.size() && best > target; ++i) {
            auto it = points.find(space.Key(out.history[i]));
            if (it != points.end() && it->second.status == "ok") best = std::min(best, it->second.time_us);
            if (best <= target) n = static_cast<int>(i) + 1;  // the first evaluation within 5%
          }
          needed.push_back(n);
        }
        std::sort(needed.begin(), needed.end());
        double mean = 0;
        for (int n : needed) mean += n;
        mean /= needed.size();
        if (info.name == "random") random_mean = mean;
        rows.push_back({op.name + " " + op.type, std::to_string(points.size()), info.name, std::to_string(seeds_here),
                        F("%.1f", mean), std::to_string(needed[needed.size() / 2]), std::to_string(needed.back()),
                        info.name == "exhaustive" ? "-" : ""});
      }
      for (auto& r : rows)
        if (r[0] == op.name + " " + op.type && r[7].empty())
          r[7] = F("%.2f", std::stod(r[4]) / std::max(random_mean, 1e-9));
    }
  }
  std::string table = RenderTable(
      {"landscape op", "configs", "strategy", "seeds", "mean evals to 5%", "median", "worst", "mean / random"}, rows);
  std::fwrite(table.data(), 1, table.size(), stdout);
  return 0;
}

// Search quality at a budget (default: the command line's): per landscape operator and strategy,
// the distribution over `seeds` seeds of best found / landscape optimum, searched exactly as
// `portkit tune --replay FILE --seed S` does (ReplaySearchQuality).
int Quality(const std::vector<std::string>& files, int seeds, const Budget& budget, const std::string& only_strategy) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& file : files) {
    auto l = LoadLandscape(file);
    if (!l.ok()) {
      std::fprintf(stderr, "%s\n", l.status().message().c_str());
      return 1;
    }
    for (const auto& info : AllStrategies()) {
      if (!only_strategy.empty() && info.name != only_strategy) continue;
      auto q = ReplaySearchQuality(*l, info.name, {}, budget, info.name == "exhaustive" ? 1 : seeds);
      if (!q.ok()) {
        std::fprintf(stderr, "%s\n", q.status().message().c_str());
        return 1;
      }
      for (const auto& r : *q) {
        double evals = 0;
        for (int e : r.evaluations) evals += e;
        rows.push_back({r.op, std::to_string(r.configs), std::to_string(r.near_optimum), info.name,
                        std::to_string(r.ratio.size()), F("%.0f%%", 100 * r.HitRate()), F("%.3f", r.Percentile(10)),
                        F("%.3f", r.Percentile(50)), F("%.3f", r.Percentile(90)), F("%.3f", r.Percentile(100)),
                        F("%.1f", evals / static_cast<double>(r.evaluations.size()))});
      }
    }
  }
  std::string table = RenderTable({"landscape op", "configs", "within 5%", "strategy", "seeds", "seeds within 5%",
                                   "p10", "median", "p90", "worst", "mean evals"},
                                  rows);
  std::fwrite(table.data(), 1, table.size(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int max_evals = 24, repeats = 11, seeds = 20, pin_threads = 0;
  Budget quality_budget;
  quality_budget.max_evals = kDefaultMaxEvals;
  quality_budget.patience = kDefaultPatience;
  quality_budget.batch = 2;
  int quality_seeds = 100;
  std::string only, quality_strategy;
  std::vector<std::string> landscapes;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--max-evals") max_evals = std::atoi(next().c_str());
    else if (a == "--repeats") repeats = std::max(5, std::atoi(next().c_str()));
    else if (a == "--seeds") seeds = std::max(1, std::atoi(next().c_str()));
    else if (a == "--only") only = next();
    else if (a == "--threads") pin_threads = std::atoi(next().c_str());
    else if (a == "--landscape") landscapes.push_back(next());
    else if (a == "--quality-evals") quality_budget.max_evals = std::max(1, std::atoi(next().c_str()));
    else if (a == "--quality-patience") quality_budget.patience = std::max(0, std::atoi(next().c_str()));
    else if (a == "--quality-batch") quality_budget.batch = std::max(1, std::atoi(next().c_str()));
    else if (a == "--quality-seeds") quality_seeds = std::max(1, std::atoi(next().c_str()));
    else if (a == "--quality-strategy") quality_strategy = next();
    else {
      std::fprintf(stderr,
                   "usage: tune_bench [--max-evals N] [--repeats N] [--seeds N] [--only gemm|conv|strategies|quality] "
                   "[--threads N] [--landscape FILE]... [--quality-evals N] [--quality-patience N] "
                   "[--quality-batch N] [--quality-seeds N] [--quality-strategy NAME]\n");
      return 2;
    }
  }
  if (landscapes.empty())
    for (const char* f :
         {"/tests/data/tune/landscape_small.jsonl", "/tests/data/tune/landscape_bert_ffn_in_128x768x3072.jsonl"})
      landscapes.push_back(std::string(PORTKIT_SOURCE_DIR) + f);
  Logger log(stderr, SystemClock(), LogLevel::kWarning);
  if (pin_threads > 0) openblas_set_num_threads(pin_threads);  // both sides on the same cores
  std::printf("tune_bench: %u hardware threads, %s threads per kernel, OpenBLAS %s\n",
              std::thread::hardware_concurrency(), pin_threads > 0 ? std::to_string(pin_threads).c_str() : "tuned",
              openblas_get_config());
  int rc = 0;
  if (only.empty() || only == "gemm") {
    std::printf("\nGEMM, BERT-base linear layers (128 tokens), fp32, bias:\n");
    rc |= Kernels(
        {Gemm("bert_ffn_in", 128, 768, 3072), Gemm("bert_ffn_out", 128, 3072, 768), Gemm("bert_qkv", 128, 768, 768)},
        max_evals, repeats, pin_threads, log);
  }
  if (only.empty() || only == "conv") {
    std::printf("\nConv2D, ResNet-50 layers (batch 1, 224x224 input), fp32:\n");
    rc |= Kernels({Conv("conv1_7x7s2", 3, 224, 64, 7, 2, 3), Conv("layer1_3x3", 64, 56, 64, 3, 1, 1),
                   Conv("layer1_1x1", 256, 56, 64, 1, 1, 0), Conv("layer2_3x3", 128, 28, 128, 3, 1, 1),
                   Conv("layer3_3x3", 256, 14, 256, 3, 1, 1), Conv("layer4_3x3", 512, 7, 512, 3, 1, 1)},
                  max_evals, repeats, pin_threads, log);
  }
  if (only.empty() || only == "strategies") {
    std::printf(
        "\nStrategy efficiency on recorded landscapes (replay): evaluations to come within 5%% of the "
        "exhaustive optimum (0 = the default already is):\n");
    rc |= Strategies(landscapes, seeds);
  }
  if (only.empty() || only == "quality") {
    std::printf(
        "\nSearch quality on recorded landscapes (replay) at a budget of %d evaluations, patience %d, "
        "batch %d: best found / landscape optimum over %d seeds (portkit tune --replay --seed 0..%d):\n",
        quality_budget.max_evals, quality_budget.patience, quality_budget.batch, quality_seeds, quality_seeds - 1);
    rc |= Quality(landscapes, quality_seeds, quality_budget, quality_strategy);
  }
  return rc;
}
