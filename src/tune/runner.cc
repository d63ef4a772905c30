#include "tune/runner.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/input_files.h"
#include "core/subprocess.h"

namespace portkit::tune {
namespace {

using KernelFn = void (*)(const float* const*, float*, const long*);

// The child's report (RunForked's report descriptor): a fixed-size header, then the samples of
// each candidate.
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
  // Held open while the object is loaded: the dynamic loader knows an object by the name it was
  // opened under, so a later /proc/self/fd/N with the same N (a closed descriptor reused) would
  // return this object instead of loading the next one.
  UniqueFd fd;
};

Loaded Load(const std::filesystem::path& so) {
  Loaded l;
  // Only code nobody else could have written is loaded; it is loaded through the descriptor that
  // was checked, so a name swapped meanwhile changes nothing (docs/safety.md).
  auto fd = OpenPrivateCode(so);
  if (!fd.ok()) {
    l.error = fd.status().message();
    return l;
  }
  void* h = dlopen(ProcFdPath(fd->get()).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    l.error = e ? e : "dlopen failed";
    return l;
  }
  l.fn = reinterpret_cast<KernelFn>(dlsym(h, "portkit_kernel"));
  if (!l.fn) l.error = "no portkit_kernel symbol in " + so.string();
  l.fd = std::move(*fd);
  return l;
}

}  // namespace

std::string ValidateOutput(const std::vector<float>& out, const Workload& w) {
  if (out.size() != w.reference.size())
    return "output has " + std::to_string(out.size()) + " values, reference " + std::to_string(w.reference.size());
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

namespace {

// The measuring child's body (RunForked): the report goes to `fd`; a crash or a hang ends the
// child, which the parent reads as a signal or a timeout.
int Child(int fd, const std::vector<std::filesystem::path>& objects, const Workload& w, const MeasureOptions& o) {
  Report rep;
  auto fail = [&](MeasureStatus s, const std::string& why) {
    rep.status = static_cast<int>(s);
    std::snprintf(rep.detail, sizeof rep.detail, "%s", why.c_str());
    WriteAllToFd(fd, &rep, sizeof rep);
    return 0;
  };
  std::vector<const float*> in;
  for (const auto& v : w.inputs) in.push_back(v.empty() ? nullptr : v.data());
  std::vector<float> out(w.output_size);
  std::vector<KernelFn> fns;
  std::vector<UniqueFd> open_objects;  // kept open until the child ends (see Loaded::fd)
  for (const auto& so : objects) {
    Loaded l = Load(so);
    if (!l.fn) return fail(MeasureStatus::kLoadError, l.error);
    // Poison the output so that a kernel that skips elements fails validation.
    std::fill(out.begin(), out.end(), std::nanf(""));
    l.fn(in.data(), out.data(), w.dims.data());
    std::string bad = ValidateOutput(out, w);
    if (!bad.empty()) return fail(MeasureStatus::kWrongResult, bad);
    fns.push_back(l.fn);
    open_objects.push_back(std::move(l.fd));
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
  WriteAllToFd(fd, &rep, sizeof rep);
  for (const auto& s : samples) WriteAllToFd(fd, s.data(), s.size() * sizeof(double));
  return 0;
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
    return all(MeasureStatus::kLoadError,
               "internal error: " + std::to_string(objects.size()) + " objects in one child");
  ForkOptions fork_options;
  fork_options.timeout_seconds = o.timeout_seconds;
  auto child = RunForked([&](int fd) { return Child(fd, objects, w, o); }, fork_options);
  if (!child.ok()) return all(MeasureStatus::kLoadError, child.status().message());
  const ProcessResult& run = *child;
  if (run.end == ProcessResult::End::kTimedOut)
    return all(MeasureStatus::kTimeout, "timed out after " + std::to_string(o.timeout_seconds) + " s");
  if (run.end == ProcessResult::End::kSignaled)
    return all(MeasureStatus::kCrashed,
               std::string("crashed (signal ") + std::to_string(run.signal) + ", " + strsignal(run.signal) + ")");
  Report rep;
  if (run.output.size() < sizeof rep)
    return all(MeasureStatus::kCrashed, "the measuring process exited without a report");
  std::memcpy(&rep, run.output.data(), sizeof rep);
  rep.detail[sizeof rep.detail - 1] = 0;
  std::vector<std::vector<double>> samples(objects.size());
  if (rep.status == static_cast<int>(MeasureStatus::kOk)) {
    size_t at = sizeof rep;
    for (size_t f = 0; f < objects.size(); ++f) {
      samples[f].resize(static_cast<size_t>(std::clamp(rep.count[f], 0, 100000)));
      size_t bytes = samples[f].size() * sizeof(double);
      if (run.output.size() < at + bytes)
        return all(MeasureStatus::kCrashed, "the measuring process exited without a report");
      std::memcpy(samples[f].data(), run.output.data() + at, bytes);
      at += bytes;
    }
  }
  if (rep.status < 0 || rep.status > static_cast<int>(MeasureStatus::kLoadError))
    return all(MeasureStatus::kCrashed, "the measuring process sent an unreadable report");
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

std::pair<Measurement, Measurement> MeasureInterleaved(const std::filesystem::path& a, const std::filesystem::path& b,
                                                       const Workload& w, const MeasureOptions& o) {
  auto r = RunChild({a, b}, w, o);
  return {r[0], r[1]};
}

}  // namespace portkit::tune
