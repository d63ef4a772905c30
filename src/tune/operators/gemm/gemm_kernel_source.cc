// The C++ source template of the blocked fp32 GEMM that every GEMM and Conv2D candidate is
// compiled from. A candidate is this text preceded by `#define PK_<KNOB> value` lines, so each
// knob is a compile-time constant the compiler specialises on (register tile, vector width,
// unroll) while shapes stay run-time arguments: one shared object serves every shape.
#include "tune/operators/gemm/gemm_kernel_source.h"

namespace portkit::tune {

const char kGemmCoreSource[] = R"PKSRC(
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace pk {

constexpr int MC = PK_MC, NC = PK_NC, KC = PK_KC, MR = PK_MR, NR = PK_NR, VW = PK_VW;
constexpr int NV = NR / VW;
static_assert(NR % VW == 0, "NR must be a multiple of the vector width");
static_assert(MC % MR == 0 && NC % NR == 0, "cache blocks must hold whole register tiles");

typedef float vf __attribute__((vector_size(VW * sizeof(float))));

static inline vf LoadU(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void StoreU(float* p, vf v) { std::memcpy(p, &v, sizeof v); }

#define PK_STR2(x) #x
#define PK_UNROLL_PRAGMA(n) _Pragma(PK_STR2(GCC unroll n))

// C[MR x NR] += A(MR x kc) * Bpanel(kc x NR). A element (i, k) is a[i * ARS + k * ACS] with
// packed A (ARS = 1, ACS = MR) or unpacked A (ARS = lda, ACS = 1).
template <bool kPackedA>
static inline void Micro(int kc, const float* __restrict a, long lda, const float* __restrict b,
                         float* __restrict c, long ldc) {
  vf acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = vf{};
  PK_UNROLL_PRAGMA(PK_UNROLL)
  for (int k = 0; k < kc; ++k) {
    vf bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = LoadU(b + (long)k * NR + v * VW);
    for (int i = 0; i < MR; ++i) {
      float ai = kPackedA ? a[(long)k * MR + i] : a[i * lda + k];
      vf av = vf{} + ai;
      for (int v = 0; v < NV; ++v) acc[i][v] += av * bv[v];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) StoreU(c + i * ldc + v * VW, LoadU(c + i * ldc + v * VW) + acc[i][v]);
}

// B block (kc x nc) into NR-wide panels, zero-padded to a whole panel.
static void PackB(const float* b, long ldb, int kc, int nc, float* out) {
  for (int j0 = 0; j0 < nc; j0 += NR) {
    int nr = nc - j0 < NR ? nc - j0 : NR;
    for (int k = 0; k < kc; ++k) {
      const float* src = b + (long)k * ldb + j0;
      float* dst = out + (long)k * NR;
      int j = 0;
      for (; j < nr; ++j) dst[j] = src[j];
      for (; j < NR; ++j) dst[j] = 0.f;
    }
    out += (long)kc * NR;
  }
}

// A block (mc x kc) into MR-tall panels (k-major inside a panel), zero-padded.
static void PackA(const float* a, long lda, int mc, int kc, float* out) {
  for (int i0 = 0; i0 < mc; i0 += MR) {
    int mr = mc - i0 < MR ? mc - i0 : MR;
    for (int k = 0; k < kc; ++k) {
      float* dst = out + (long)k * MR;
      int i = 0;
      for (; i < mr; ++i) dst[i] = a[(long)(i0 + i) * lda + k];
      for (; i < MR; ++i) dst[i] = 0.f;
    }
    out += (long)kc * MR;
  }
}

struct Buffers {
  std::vector<float> a, b;
};

// One register tile at (ir, jr) of the current block; edges go through a padded scratch tile.
static inline void Tile(const float* a_blk, long lda, const float* pa, const float* pb, int kc, int mr, int nr,
                        float* c, long ldc) {
  if (mr == MR && nr == NR) {
    if (PK_PACK_A) Micro<true>(kc, pa, 0, pb, c, ldc);
    else Micro<false>(kc, a_blk, lda, pb, c, ldc);
    return;
  }
  alignas(64) float tmp[MR * NR] = {};
  if (PK_PACK_A) {
    Micro<true>(kc, pa, 0, pb, tmp, NR);
  } else {
    std::vector<float> pad((size_t)MR * kc, 0.f);
    PackA(a_blk, lda, mr, kc, pad.data());
    Micro<true>(kc, pad.data(), 0, pb, tmp, NR);
  }
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) c[(long)i * ldc + j] += tmp[i * NR + j];
}

// C(m x n) += A(m x k) * B(k x n), all row-major with leading dimensions.
static void GemmBlocked(const float* A, long lda, const float* B, long ldb, float* C, long ldc, int m, int n,
                        int k, Buffers& buf) {
  if (buf.b.size() < (size_t)KC * NC) buf.b.resize((size_t)KC * NC);
  if (PK_PACK_A && buf.a.size() < (size_t)KC * MC) buf.a.resize((size_t)KC * MC);
  for (int jc = 0; jc < n; jc += NC) {
    int nc = n - jc < NC ? n - jc : NC;
    for (int pc = 0; pc < k; pc += KC) {
      int kc = k - pc < KC ? k - pc : KC;
      PackB(B + (long)pc * ldb + jc, ldb, kc, nc, buf.b.data());
      for (int ic = 0; ic < m; ic += MC) {
        int mc = m - ic < MC ? m - ic : MC;
        const float* a_blk = A + (long)ic * lda + pc;
        if (PK_PACK_A) PackA(a_blk, lda, mc, kc, buf.a.data());
        float* c_blk = C + (long)ic * ldc + jc;
#if PK_ORDER == 0
        for (int jr = 0; jr < nc; jr += NR)
          for (int ir = 0; ir < mc; ir += MR) {
#else
        for (int ir = 0; ir < mc; ir += MR)
          for (int jr = 0; jr < nc; jr += NR) {
#endif
            int mr = mc - ir < MR ? mc - ir : MR, nr = nc - jr < NR ? nc - jr : NR;
            Tile(a_blk + (long)ir * lda, lda, buf.a.data() + (long)ir * kc, buf.b.data() + (long)jr * kc, kc, mr, nr,
                 c_blk + (long)ir * ldc + jr, ldc);
          }
      }
    }
  }
}

// Scratch of the thread running a share of the work (the caller or a pool worker), kept between
// calls so that timing does not measure page faults. thread_local: concurrent calls from several
// threads never share a buffer (the kernel is reentrant).
static Buffers& ThreadBuffers() {
  static thread_local Buffers buffers;
  return buffers;
}

// A call's work: `units` shares, claimed by index by the calling thread and by pool workers. The
// caller claims shares too, so a call completes even when no worker is free (or none exists).
struct Job {
  void (*fn)(const void*, int) = nullptr;
  const void* arg = nullptr;
  int units = 0;
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  int users = 0;  // workers holding a pointer to this job (guarded by the pool's mutex)
};

static void Work(Job& job) {
  for (int u; (u = job.next.fetch_add(1)) < job.units;) {
    job.fn(job.arg, u);
    job.done.fetch_add(1);
  }
}

// The persistent pool: PK_THREADS - 1 workers started on the first multi-threaded call and kept,
// blocked on a condition variable between calls (no thread is started per call). Calls from
// several threads at once queue their jobs; the state is guarded by one mutex.
class Pool {
 public:
  explicit Pool(int workers) : owner_(getpid()) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { Loop(); });
  }
  void Run(Job& job) {
    // In a child forked after the pool started, the workers do not exist: the caller does it all.
    bool pooled = getpid() == owner_ && !threads_.empty();
    if (pooled) {
      std::lock_guard<std::mutex> lk(mu_);
      int offers = job.units - 1 < (int)threads_.size() ? job.units - 1 : (int)threads_.size();
      for (int i = 0; i < offers; ++i) queue_.push_back(&job);
      work_cv_.notify_all();
    }
    Work(job);
    if (!pooled) return;
    std::unique_lock<std::mutex> lk(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) it = *it == &job ? queue_.erase(it) : it + 1;
    done_cv_.wait(lk, [&] { return job.users == 0 && job.done.load() == job.units; });
  }
  void Stop() {
    if (getpid() != owner_) return;  // a forked child: the threads are not ours
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      work_cv_.notify_all();
    }
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      Job* job = queue_.front();
      queue_.pop_front();
      ++job->users;
      lk.unlock();
      Work(*job);
      lk.lock();
      --job->users;
      done_cv_.notify_all();
    }
  }
  pid_t owner_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Job*> queue_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

static std::atomic<Pool*> g_pool{nullptr};

static Pool& ThePool() {
  static Pool* pool = [] {
    Pool* p = new Pool(PK_THREADS - 1);
    g_pool.store(p);
    return p;
  }();
  return *pool;
}

// Unloading the object (dlclose) or exiting stops and joins the workers first.
__attribute__((destructor)) static void StopPool() {
  if (Pool* p = g_pool.exchange(nullptr)) p->Stop();
}

struct GemmArgs {
  const float* A;
  long lda;
  const float* B;
  long ldb;
  float* C;
  long ldc;
  int m, n, k, units, threads;
  bool split_n;
};

static void GemmShare(const void* p, int t) {
  const GemmArgs& g = *static_cast<const GemmArgs*>(p);
  int u0 = g.units * t / g.threads, u1 = g.units * (t + 1) / g.threads;
  if (g.split_n) {
    int j0 = u0 * NR, j1 = u1 * NR < g.n ? u1 * NR : g.n;
    GemmBlocked(g.A, g.lda, g.B + j0, g.ldb, g.C + j0, g.ldc, g.m, j1 - j0, g.k, ThreadBuffers());
  } else {
    int i0 = u0 * MR, i1 = u1 * MR < g.m ? u1 * MR : g.m;
    GemmBlocked(g.A + (long)i0 * g.lda, g.lda, g.B, g.ldb, g.C + (long)i0 * g.ldc, g.ldc, i1 - i0, g.n, g.k,
                ThreadBuffers());
  }
}

// C = A * B (+ bias), bias per column (bias_per_row = 0) or per row (1), work split into
// PK_THREADS shares along the larger of m and n in whole register tiles, run by the calling
// thread and the persistent pool.
static void Gemm(const float* A, long lda, const float* B, long ldb, const float* bias, int bias_per_row, float* C,
                 long ldc, int m, int n, int k) {
  for (int i = 0; i < m; ++i) {
    float* row = C + (long)i * ldc;
    for (int j = 0; j < n; ++j) row[j] = bias ? (bias_per_row ? bias[i] : bias[j]) : 0.f;
  }
  int threads = PK_THREADS;
  bool split_n = n / NR >= m / MR;
  int units = split_n ? (n + NR - 1) / NR : (m + MR - 1) / MR;
  if (threads > units) threads = units > 0 ? units : 1;
  if (threads <= 1) {
    GemmBlocked(A, lda, B, ldb, C, ldc, m, n, k, ThreadBuffers());
    return;
  }
  GemmArgs args{A, lda, B, ldb, C, ldc, m, n, k, units, threads, split_n};
  Job job;
  job.fn = GemmShare;
  job.arg = &args;
  job.units = threads;
  ThePool().Run(job);
}

}  // namespace pk
)PKSRC";

const char kGemmEntrySource[] = R"PKSRC(
// Entry point: C[M,N] = A[M,K] * B[K,N] (+ bias[N]); dims = {M, N, K}.
extern "C" void portkit_kernel(const float* const* in, float* out, const long* dims) {
  int m = (int)dims[0], n = (int)dims[1], k = (int)dims[2];
  pk::Gemm(in[0], k, in[1], n, in[2], 0, out, n, m, n, k);
}
)PKSRC";

const char kConv2dEntrySource[] = R"PKSRC(
// Entry point: y[N,O,OH,OW] = conv2d(x[N,C,H,W], w[O,C/g,KH,KW]) (+ bias[O]) as im2col + GEMM
// per image and group; dims = {N, C, H, W, O, KH, KW, SH, SW, PH, PW, G, OH, OW}.
static thread_local std::vector<float> g_col;
extern "C" void portkit_kernel(const float* const* in, float* out, const long* d) {
  const float* x = in[0];
  const float* w = in[1];
  const float* bias = in[2];
  long N = d[0], C = d[1], H = d[2], W = d[3], O = d[4], KH = d[5], KW = d[6], SH = d[7], SW = d[8], PH = d[9],
       PW = d[10], G = d[11], OH = d[12], OW = d[13];
  long cg = C / G, og = O / G, kdim = cg * KH * KW, ndim = OH * OW;
  bool direct = KH == 1 && KW == 1 && SH == 1 && SW == 1 && PH == 0 && PW == 0;
  if (!direct && g_col.size() < (size_t)(kdim * ndim)) g_col.resize(kdim * ndim);
  for (long n = 0; n < N; ++n) {
    for (long g = 0; g < G; ++g) {
      const float* xg = x + (n * C + g * cg) * H * W;
      const float* col = xg;
      if (!direct) {
        float* dst = g_col.data();
        for (long c = 0; c < cg; ++c)
          for (long kh = 0; kh < KH; ++kh)
            for (long kw = 0; kw < KW; ++kw) {
              const float* src = xg + c * H * W;
              for (long oh = 0; oh < OH; ++oh) {
                long ih = oh * SH - PH + kh;
                float* row = dst + oh * OW;
                if (ih < 0 || ih >= H) {
                  for (long ow = 0; ow < OW; ++ow) row[ow] = 0.f;
                  continue;
                }
                const float* srow = src + ih * W;
                for (long ow = 0; ow < OW; ++ow) {
                  long iw = ow * SW - PW + kw;
                  row[ow] = (iw >= 0 && iw < W) ? srow[iw] : 0.f;
                }
              }
              dst += ndim;
            }
        col = g_col.data();
      }
      pk::Gemm(w + g * og * kdim, kdim, col, ndim, bias ? bias + g * og : nullptr, 1,
               out + (n * O + g * og) * ndim, ndim, (int)og, (int)ndim, (int)kdim);
    }
  }
}
)PKSRC";

}  // namespace portkit::tune
