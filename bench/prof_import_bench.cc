// Benchmark of `portkit prof import`: MB/s (uncompressed bytes) and peak RSS on a generated
// Kineto-style trace and on each real trace given, beside Python's json.load of the same file
// (measured in the same run), one row per trace.
//
// Usage: prof_import_bench [--mb N (generated trace size, default 512; 0: none)] [--skip-json]
//                          [--timeline] [--trace FILE] [FILE|FOLDER ...]
// --timeline: also exports each imported trace's timeline (`prof export timeline`, streamed into a
// file) in a child of its own and prints its time and peak RSS.
// A FOLDER stands for its *.json and *.json.gz files (sorted); gzip traces are decompressed first so
// both sides read the same plain JSON. bench/record_real_traces.py records a real-trace corpus.
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "prof/exporters/timeline.h"
#include "prof/importers/chrome_trace.h"
#include "prof/store.h"

namespace fs = std::filesystem;
using portkit::prof::ImportChromeTrace;
using portkit::prof::Store;

namespace {

// Writes a Kineto-like trace of about `mb` megabytes: cpu ops, runtime launches and kernels.
void Generate(const fs::path& path, double mb) {
  std::ofstream out(path);
  out << "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"Generated GPU\"}],\n"
         "\"traceEvents\": [\n";
  const char* ops[] = {"aten::linear", "aten::addmm", "aten::relu",   "aten::softplus",
                       "aten::tanh",   "aten::mul",   "aten::conv2d", "aten::add_"};
  size_t bytes = 0, i = 0;
  int64_t ts = 1700000000000000;
  char buf[1024];
  while (bytes < static_cast<size_t>(mb * 1e6)) {
    const char* op = ops[i % 8];
    int n = std::snprintf(
        buf, sizeof buf,
        "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": 100, \"tid\": 100, \"ts\": %lld.%03zu, "
        "\"dur\": 12.5, \"args\": {\"External id\": %zu, \"Input Dims\": [[64, 128], [128]], \"Input type\": "
        "[\"float\", \"float\"]}},\n"
        "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 100, \"tid\": 100, "
        "\"ts\": %lld.%03zu, "
        "\"dur\": 4.2, \"args\": {\"External id\": %zu, \"cbid\": 211, \"correlation\": %zu}},\n"
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void kernel_%zu<float>(Params)\", \"pid\": 0, \"tid\": 7, "
        "\"ts\": %lld.%03zu, "
        "\"dur\": 3.7, \"args\": {\"External id\": %zu, \"device\": 0, \"stream\": 7, \"correlation\": %zu, "
        "\"registers per thread\": 32, \"shared memory\": 0, \"grid\": [64, 1, 1], \"block\": [256, 1, 1], "
        "\"est. achieved occupancy %%\": 50}},\n",
        op, static_cast<long long>(ts), i % 1000, i, static_cast<long long>(ts + 2), i % 1000, i, i, i % 50,
        static_cast<long long>(ts + 8), i % 1000, i, i);
    out.write(buf, n);
    bytes += static_cast<size_t>(n);
    ts += 20;
    ++i;
  }
  out << "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 100, \"tid\": 100, "
         "\"ts\": 1700000000000000, \"dur\": 1.0}\n]}\n";
}

struct Run {
  double seconds = 0;           // wall clock
  double cpu_seconds = 0;       // user + system, all threads
  double main_cpu_seconds = 0;  // user + system of the child's main thread (ours: the store's thread)
  long peak_kb = 0;
  bool ok = false;
};

double ThreadCpuSeconds() {
  struct rusage ru {};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Runs `fn` in a child process so its peak RSS is its own. The child's main thread reports its
// own CPU time through a shared page (its other threads have ended by then; their time is the
// rest of the child's rusage).
template <typename Fn>
Run InChild(Fn fn) {
  Run r;
  void* page = mmap(nullptr, sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto* main_cpu = page == MAP_FAILED ? nullptr : static_cast<double*>(page);
  if (main_cpu) *main_cpu = 0;
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    bool ok = fn();
    if (main_cpu) *main_cpu = ThreadCpuSeconds();
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_kb = ru.ru_maxrss;
  r.cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                  static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (main_cpu) {
    r.main_cpu_seconds = *main_cpu;
    munmap(page, sizeof(double));
  }
  return r;
}

bool g_skip_json = false;
bool g_timeline = false;
// Timeline exports (--timeline), printed at the end.
struct TimelineRow {
  std::string what;
  double mb, out_mb;
  Run run;
};
std::vector<TimelineRow> g_timelines;
// Our runs, for the per-thread table printed at the end.
struct ThreadRow {
  std::string what;
  double mb;
  Run run;
};
std::vector<ThreadRow> g_threads;

void Measure(const fs::path& trace, const fs::path& work) {
  double mb = static_cast<double>(fs::file_size(trace)) / 1e6;
  Run ours = InChild([&] {
    fs::path db = work / "bench.db";
    fs::remove(db);
    auto store = Store::Open(db.string());
    if (!store.ok()) return false;
    auto r = ImportChromeTrace(trace, trace.filename().string(), "kineto", *store);
    return r.ok();
  });
  Run py;
  if (!g_skip_json)
    py = InChild([&] {
      // exec, not system(): the child's own rusage is then python's.
      std::string code = "import json; json.load(open('" + trace.string() + "'))";
      execl("/usr/bin/python3", "python3", "-c", code.c_str(), static_cast<char*>(nullptr));
      return false;
    });
  std::printf("| %-30s | %7.1f | %9.1f | %8.1f | %7.2fx | %8.1f | %8.1f | %8.2fx | %8.0f | %8.0f | %5.2f |\n",
              trace.filename().string().substr(0, 30).c_str(), mb, ours.ok ? mb / ours.seconds : 0.0,
              py.ok ? mb / py.seconds : 0.0, ours.ok && py.ok ? py.seconds / ours.seconds : 0.0,
              ours.ok ? mb / ours.cpu_seconds : 0.0, py.ok ? mb / py.cpu_seconds : 0.0,
              ours.ok && py.ok ? py.cpu_seconds / ours.cpu_seconds : 0.0, static_cast<double>(ours.peak_kb) / 1024.0,
              static_cast<double>(py.peak_kb) / 1024.0, static_cast<double>(ours.peak_kb) / 1024.0 / mb);
  if (ours.ok) g_threads.push_back({trace.filename().string(), mb, ours});
  std::fflush(stdout);
  if (!g_timeline || !ours.ok) return;
  // `prof export timeline` of the store just written, as the command does it: streamed to a file.
  const fs::path out = work / "timeline.json";
  Run tl = InChild([&] {
    auto store = Store::OpenForReading(work / "bench.db");
    if (!store.ok()) return false;
    portkit::prof::TimelineStats stats;
    return portkit::WriteFileAtomicStreamed(
               out,
               [&](const portkit::ReportSet::Sink& sink) { return portkit::prof::WriteTimeline(*store, sink, &stats); })
        .ok();
  });
  std::error_code ec;
  const double out_mb = static_cast<double>(fs::file_size(out, ec)) / 1e6;
  if (tl.ok) g_timelines.push_back({trace.filename().string(), mb, ec ? 0.0 : out_mb, tl});
  fs::remove(out, ec);
}

// The store alone: the generated trace's events (same names, args and geometry), built in memory
// and written through TraceWriter (inserts, launch links, commit, checkpoint) with no file, no JSON.
// The floor of an import into SQLite on this machine.
void MeasureStoreOnly(double mb, const fs::path& work) {
  const char* ops[] = {"aten::linear", "aten::addmm", "aten::relu",   "aten::softplus",
                       "aten::tanh",   "aten::mul",   "aten::conv2d", "aten::add_"};
  // One triple of the generated trace is ~730 bytes of JSON.
  const size_t triples = static_cast<size_t>(mb * 1e6 / 730.0);
  Run r = InChild([&] {
    fs::path db = work / "floor.db";
    fs::remove(db);
    auto store = Store::Open(db.string());
    if (!store.ok()) return false;
    auto writer = store->BeginTrace("floor", "kineto");
    if (!writer.ok()) return false;
    std::string kernel_names[50];
    for (int k = 0; k < 50; ++k) kernel_names[k] = "void kernel_" + std::to_string(k) + "<float>(Params)";
    char op_args[256], rt_args[256], k_args[512];
    for (size_t i = 0; i < triples; ++i) {
      int64_t ts = 1700000000000000000 + static_cast<int64_t>(i) * 20000;
      portkit::prof::Event op;
      op.kind = portkit::prof::EventKind::kCpuOp;
      op.name = ops[i % 8];
      op.category = "cpu_op";
      op.ts_ns = ts, op.dur_ns = 12500, op.pid = 100, op.tid = 100, op.external_id = static_cast<int64_t>(i);
      op.input_dims = "[[64, 128], [128]]";
      op.input_types = "[\"float\", \"float\"]";
      op.args = std::string_view(
          op_args,
          static_cast<size_t>(std::snprintf(
              op_args, sizeof op_args,
              "{\"External id\": %zu, \"Input Dims\": [[64, 128], [128]], \"Input type\": [\"float\", \"float\"]}",
              i)));
      portkit::prof::Event rt;
      rt.kind = portkit::prof::EventKind::kRuntime;
      rt.name = "cudaLaunchKernel";
      rt.category = "cuda_runtime";
      rt.ts_ns = ts + 2000, rt.dur_ns = 4200, rt.pid = 100, rt.tid = 100;
      rt.external_id = rt.correlation = static_cast<int64_t>(i);
      rt.args = std::string_view(
          rt_args, static_cast<size_t>(std::snprintf(
                       rt_args, sizeof rt_args, "{\"External id\": %zu, \"cbid\": 211, \"correlation\": %zu}", i, i)));
      portkit::prof::Event k;
      k.kind = portkit::prof::EventKind::kKernel;
      k.name = kernel_names[i % 50];
      k.category = "kernel";
      k.ts_ns = ts + 8000, k.dur_ns = 3700, k.pid = 0, k.tid = 7;
      k.external_id = k.correlation = static_cast<int64_t>(i);
      k.grid[0] = 64, k.grid[1] = 1, k.grid[2] = 1, k.block[0] = 256, k.block[1] = 1, k.block[2] = 1;
      k.registers = 32, k.shared_memory = 0, k.occupancy = 50;
      k.args = std::string_view(
          k_args,
          static_cast<size_t>(std::snprintf(
              k_args, sizeof k_args,
              "{\"External id\": %zu, \"device\": 0, \"stream\": 7, \"correlation\": %zu, \"registers per thread\": "
              "32, "
              "\"shared memory\": 0, \"grid\": [64, 1, 1], \"block\": [256, 1, 1], \"est. achieved occupancy %%\": 50}",
              i, i)));
      if (!writer->AddEvent(op).ok() || !writer->AddEvent(rt).ok() || !writer->AddEvent(k).ok()) return false;
    }
    return writer->Finish(triples * 3, 0, "").ok();
  });
  if (r.ok) g_threads.push_back({"store only (no file, no JSON)", mb, r});
  std::printf("| %-30s | %7.1f | %9.1f | %8s | %8s | %8.1f | %8s | %9s | %8.0f | %8s | %5.2f |\n",
              "store only (no file, no JSON)", mb, r.ok ? mb / r.seconds : 0.0, "-", "-",
              r.ok ? mb / r.cpu_seconds : 0.0, "-", "-", static_cast<double>(r.peak_kb) / 1024.0, "-",
              static_cast<double>(r.peak_kb) / 1024.0 / mb);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  double mb = 512;
  std::vector<fs::path> traces;
  bool missing = false;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      std::fprintf(stderr, "prof_import_bench: %s: no such file or folder\n", p.string().c_str());
      missing = true;
      return;
    }
    if (!fs::is_directory(p)) return traces.push_back(p);
    std::vector<fs::path> in_folder;
    for (const auto& entry : fs::directory_iterator(p)) {
      const std::string name = entry.path().filename().string();
      auto ends = [&](std::string_view tail) {
        return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
      };
      if (entry.is_regular_file() && (ends(".json") || ends(".json.gz"))) in_folder.push_back(entry.path());
    }
    std::sort(in_folder.begin(), in_folder.end());
    traces.insert(traces.end(), in_folder.begin(), in_folder.end());
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf(
          "usage: prof_import_bench [--mb MB] [--skip-json] [--timeline] [--trace] TRACE_OR_FOLDER...\n"
          "  --mb MB      also generate and import a Kineto trace of MB megabytes (default 512; 0: none)\n"
          "  --skip-json  do not time Python's json.load beside each import\n"
          "  --timeline   also export each imported trace's timeline (time, CPU, peak RSS)\n");
      return 0;
    }
    if (a.size() > 1 && a[0] == '-' && a != "--mb" && a != "--trace" && a != "--skip-json" && a != "--timeline") {
      std::fprintf(stderr, "prof_import_bench: unknown option %s (see --help)\n", a.c_str());
      return 2;
    }
    if (a == "--mb" && i + 1 < argc) mb = std::atof(argv[++i]);
    else if (a == "--trace" && i + 1 < argc) add(argv[++i]);
    else if (a == "--skip-json") g_skip_json = true;
    else if (a == "--timeline") g_timeline = true;
    else add(a);
  }
  if (missing) return 2;
  fs::path work = fs::temp_directory_path() / ("portkit_prof_bench_" + std::to_string(getpid()));
  fs::create_directories(work);
  double load_before[3] = {0, 0, 0}, load_after[3] = {0, 0, 0};
  if (getloadavg(load_before, 3) != 3) load_before[0] = load_before[1] = load_before[2] = -1;
  std::printf(
      "prof import benchmark (2 threads: one parses, one writes the store; RSS = peak resident memory of the "
      "importing process)\nload average at the start: %.2f %.2f %.2f\n\n",
      load_before[0], load_before[1], load_before[2]);
  std::printf("| %-30s | %7s | %9s | %8s | %8s | %8s | %8s | %9s | %8s | %8s | %5s |\n", "trace (uncompressed)", "MB",
              "ours MB/s", "json MB/s", "speedup", "ours MB/cpu-s", "json MB/cpu-s", "cpu speedup", "ours RSS",
              "json RSS", "RSS/B");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(32, '-').c_str(), std::string(9, '-').c_str(),
              std::string(11, '-').c_str(), std::string(10, '-').c_str(), std::string(10, '-').c_str(),
              std::string(10, '-').c_str(), std::string(10, '-').c_str(), std::string(11, '-').c_str(),
              std::string(10, '-').c_str(), std::string(10, '-').c_str(), std::string(7, '-').c_str());
  if (mb > 0) {
    fs::path gen = work / "generated_kineto.json";
    Generate(gen, mb);
    Measure(gen, work);
    MeasureStoreOnly(static_cast<double>(fs::file_size(gen)) / 1e6, work);
    fs::remove(gen);
  }
  for (const fs::path& trace : traces) {
    if (trace.extension() != ".gz") {
      Measure(trace, work);
      continue;
    }
    // Decompressed first, so both sides read the same plain JSON.
    fs::path plain = work / trace.filename().replace_extension("");
    std::string cmd = "zcat -f '" + trace.string() + "' > '" + plain.string() + "'";
    if (std::system(cmd.c_str()) == 0) Measure(plain, work);
    fs::remove(plain);
  }
  // Per thread: the store's thread (the importing process's main thread) is the critical path
  // while the parse runs beside it on another core; on an idle machine with two cores the wall
  // clock cannot beat max(store thread, all threads / 2).
  std::printf(
      "\nCPU seconds by thread (ours): the store thread runs SQLite (and renames the new store into "
      "place); the others parse the JSON\n\n");
  std::printf("| %-30s | %7s | %8s | %8s | %14s | %15s | %22s |\n", "trace", "CPU s", "store s", "others s",
              "store MB/cpu-s", "others MB/cpu-s", "idle 2-core bound MB/s");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(32, '-').c_str(), std::string(9, '-').c_str(),
              std::string(10, '-').c_str(), std::string(10, '-').c_str(), std::string(16, '-').c_str(),
              std::string(17, '-').c_str(), std::string(24, '-').c_str());
  for (const auto& t : g_threads) {
    double store = t.run.main_cpu_seconds, others = std::max(0.0, t.run.cpu_seconds - store);
    double bound = std::max(store, t.run.cpu_seconds / 2);
    std::printf("| %-30s | %7.2f | %8.2f | %8.2f | %14.1f | %15.1f | %22.1f |\n", t.what.substr(0, 30).c_str(),
                t.run.cpu_seconds, store, others, store > 0 ? t.mb / store : 0.0, others > 0.01 ? t.mb / others : 0.0,
                bound > 0 ? t.mb / bound : 0.0);
  }
  if (g_timeline) {
    std::printf(
        "\n`prof export timeline` of each imported trace (streamed into a file; RSS/B = peak RSS per byte of "
        "trace)\n\n");
    std::printf("| %-30s | %7s | %9s | %7s | %7s | %8s | %5s |\n", "trace", "MB", "output MB", "wall s", "CPU s",
                "RSS MiB", "RSS/B");
    std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(32, '-').c_str(), std::string(9, '-').c_str(),
                std::string(11, '-').c_str(), std::string(9, '-').c_str(), std::string(9, '-').c_str(),
                std::string(10, '-').c_str(), std::string(7, '-').c_str());
    for (const auto& t : g_timelines)
      std::printf("| %-30s | %7.1f | %9.1f | %7.2f | %7.2f | %8.0f | %5.2f |\n", t.what.substr(0, 30).c_str(), t.mb,
                  t.out_mb, t.run.seconds, t.run.cpu_seconds, static_cast<double>(t.run.peak_kb) / 1024.0,
                  static_cast<double>(t.run.peak_kb) / 1024.0 / t.mb);
  }
  if (getloadavg(load_after, 3) != 3) load_after[0] = load_after[1] = load_after[2] = -1;
  std::printf(
      "\nMB/s: wall clock; MB/cpu-s: per second of CPU time (user + system, every thread; what a loaded\n"
      "machine still measures). RSS in MiB; RSS/B = our peak RSS per byte of trace.\n"
      "Load average at the end: %.2f %.2f %.2f.\n"
      "Goals: >= 150 MB/s, >= 5x json.load (cpu speedup), RSS/B <= 0.3, on every trace.\n",
      load_after[0], load_after[1], load_after[2]);
  fs::remove_all(work);
  return 0;
}
