#include "tune/runner.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace portkit::tune {
namespace {

using KernelFn = void (*)(const float* const*, float*, const long*);

// The child's report over the pipe: a fixed header then the samples of each candidate.
struct Report {
  int status = 0;  // MeasureStatus
  int count[2] = {0, 0};
  char detail[256] = {};
};
// Written and read as raw bytes over the pipe.
static_assert(std::is_trivially_copyable_v<Report>, "Report crosses the pipe as raw bytes");
constexpr size_t kMaxObjects = sizeof(Report::count) / sizeof(Report::count[0]);

double NowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Loaded {
  KernelFn fn = nullptr;
  std::string error;
};

Loaded Load(const std::filesystem::path& so) {
  Loaded l;
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    l.error = e ? e : "dlopen failed";
    return l;
  }
  l.fn = reinterpret_cast<KernelFn>(dlsym(h, "portkit_kernel"));
  if (!l.fn) l.error = "no portkit_kernel symbol in " + so.string();
  return l;
}

// Returns "" when the output matches the reference within the workload's tolerance.
std::string Validate(const std::vector<float>& out, const Workload& w) {
  for (size_t i = 0; i < out.size(); ++i) {
    double ref = w.reference[i], got = out[i];
    double diff = std::fabs(got - ref);
    if (!(diff <= w.atol + w.rtol * std::fabs(ref))) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "output[%zu] = %.6g, reference %.6g (tolerance %.3g)", i, got, ref,
                    w.atol + w.rtol * std::fabs(ref));
      return buf;
    }
  }
  return "";
}

void WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n <= 0) return;
    p += n;
    size -= static_cast<size_t>(n);
  }
}

bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = read(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Child body: never returns.
[[noreturn]] void Child(int fd, const std::vector<std::filesystem::path>& objects, const Workload& w,
                        const MeasureOptions& o) {
  alarm(static_cast<unsigned>(o.timeout_seconds));
  Report rep;
  auto fail = [&](MeasureStatus s, const std::string& why) {
    rep.status = static_cast<int>(s);
    std::snprintf(rep.detail, sizeof rep.detail, "%s", why.c_str());
    WriteAll(fd, &rep, sizeof rep);
    _exit(0);
  };
  std::vector<const float*> in;
  for (const auto& v : w.inputs) in.push_back(v.empty() ? nullptr : v.data());
  std::vector<float> out(w.output_size);
  std::vector<KernelFn> fns;
  for (const auto& so : objects) {
    Loaded l = Load(so);
    if (!l.fn) fail(MeasureStatus::kLoadError, l.error);
    // Poison the output so that a kernel that skips elements fails validation.
    std::fill(out.begin(), out.end(), std::nanf(""));
    l.fn(in.data(), out.data(), w.dims.data());
    std::string bad = Validate(out, w);
    if (!bad.empty()) fail(MeasureStatus::kWrongResult, bad);
    fns.push_back(l.fn);
  }
  // Warm-up and calibration: calls per repeat so that a repeat lasts min_repeat_us.
  std::vector<int> calls(fns.size(), 1);
  for (size_t f = 0; f < fns.size(); ++f) {
    double t0 = NowUs();
    int n = 0;
    do {
      fns[f](in.data(), out.data(), w.dims.data());
      ++n;
    } while (NowUs() - t0 < 2 * o.min_repeat_us && n < 1000);
    double per_call = (NowUs() - t0) / n;
    calls[f] = std::max(1, static_cast<int>(std::ceil(o.min_repeat_us / std::max(per_call, 1e-3))));
    calls[f] = std::min(calls[f], 100000);
  }
  std::vector<std::vector<double>> samples(fns.size());
  for (int r = 0; r < o.repeats; ++r)
    for (size_t f = 0; f < fns.size(); ++f) {
      double t0 = NowUs();
      for (int c = 0; c < calls[f]; ++c) fns[f](in.data(), out.data(), w.dims.data());
      samples[f].push_back((NowUs() - t0) / calls[f]);
    }
  rep.status = static_cast<int>(MeasureStatus::kOk);
  for (size_t f = 0; f < fns.size(); ++f) rep.count[f] = static_cast<int>(samples[f].size());
  WriteAll(fd, &rep, sizeof rep);
  for (const auto& s : samples) WriteAll(fd, s.data(), s.size() * sizeof(double));
  _exit(0);
}

std::vector<Measurement> RunChild(const std::vector<std::filesystem::path>& objects, const Workload& w,
                                  const MeasureOptions& o) {
  std::vector<Measurement> result(objects.size());
  auto all = [&](MeasureStatus s, const std::string& why) {
    for (auto& m : result) {
      m.status = s;
      m.detail = why;
    }
    return result;
  };
  // The report has room for kMaxObjects sample counts (Measure: 1, MeasureInterleaved: 2).
  if (objects.empty() || objects.size() > kMaxObjects)
    return all(MeasureStatus::kLoadError, "internal error: " + std::to_string(objects.size()) + " objects in one child");
  int fds[2];
  if (pipe(fds) != 0) return all(MeasureStatus::kLoadError, "pipe failed");
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return all(MeasureStatus::kLoadError, "fork failed");
  }
  if (pid == 0) {
    close(fds[0]);
    Child(fds[1], objects, w, o);
  }
  close(fds[1]);
  Report rep;
  bool got = ReadAll(fds[0], &rep, sizeof rep);
  std::vector<std::vector<double>> samples(objects.size());
  if (got && rep.status == static_cast<int>(MeasureStatus::kOk)) {
    for (size_t f = 0; f < objects.size(); ++f) {
      samples[f].resize(static_cast<size_t>(std::clamp(rep.count[f], 0, 100000)));
      if (!ReadAll(fds[0], samples[f].data(), samples[f].size() * sizeof(double))) got = false;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM) return all(MeasureStatus::kTimeout, "timed out after " + std::to_string(o.timeout_seconds) + " s");
    return all(MeasureStatus::kCrashed, std::string("crashed (signal ") + std::to_string(sig) + ", " +
                                            strsignal(sig) + ")");
  }
  if (!got) return all(MeasureStatus::kCrashed, "the measuring process exited without a report");
  if (rep.status != static_cast<int>(MeasureStatus::kOk))
    return all(static_cast<MeasureStatus>(rep.status), rep.detail);
  for (size_t f = 0; f < objects.size(); ++f) {
    auto& m = result[f];
    m.status = MeasureStatus::kOk;
    m.samples_us = samples[f];
    std::vector<double> sorted = samples[f];
    std::sort(sorted.begin(), sorted.end());
    if (sorted.empty()) continue;
    size_t n = sorted.size();
    m.median_us = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  }
  return result;
}

}  // namespace

const char* MeasureStatusName(MeasureStatus s) {
  switch (s) {
    case MeasureStatus::kOk: return "ok";
    case MeasureStatus::kWrongResult: return "wrong_result";
    case MeasureStatus::kCrashed: return "crashed";
    case MeasureStatus::kTimeout: return "timeout";
    case MeasureStatus::kLoadError: return "load_error";
  }
  return "unknown";
}

Measurement Measure(const std::filesystem::path& shared_object, const Workload& w, const MeasureOptions& o) {
  return RunChild({shared_object}, w, o)[0];
}

std::pair<Measurement, Measurement> MeasureInterleaved(const std::filesystem::path& a,
                                                       const std::filesystem::path& b, const Workload& w,
                                                       const MeasureOptions& o) {
  auto r = RunChild({a, b}, w, o);
  return {r[0], r[1]};
}

}  // namespace portkit::tune
