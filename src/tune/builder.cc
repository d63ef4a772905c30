#include "tune/builder.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/atomic_file.h"
#include "core/input_files.h"
#include "core/subprocess.h"
#include "core/thread_pool.h"
#include "tune/knowledge_base.h"

namespace portkit::tune {
namespace fs = std::filesystem;

Builder::Builder(BuildOptions options, Logger& logger) : options_(std::move(options)), logger_(logger) {
  SpawnOptions version;
  version.argv = {options_.compiler, "--version"};
  version.timeout_seconds = 60;
  version.merge_stderr = true;
  if (auto run = Spawn(version); run.ok() && run->ok())
    compiler_version_ = run->output.substr(0, run->output.find('\n'));
  // -march=native code is only valid on this CPU: its model and SIMD flags are part of the key.
  machine_ = CpuDescription();
  RemoveStaleObjects();
}

void Builder::RemoveStaleObjects() {
  // A tuner killed mid-compile leaves its private object (KEY.so.tmpPID_N) and maybe a source's
  // temporary (KEY.cc.tmp.PID): removed once that process is gone (a live run's are kept).
  std::error_code ec;
  std::vector<std::string> removed = RemoveStaleTemporaries(options_.cache_dir);
  for (const auto& e : fs::directory_iterator(options_.cache_dir, ec)) {
    std::string name = e.path().filename().string();
    size_t at = name.find(".so.tmp");
    if (at == std::string::npos) continue;
    const char* digits = name.c_str() + at + 7;
    char* end = nullptr;
    long pid = std::strtol(digits, &end, 10);
    if (end == digits || *end != '_' || pid <= 0) continue;
    if (!e.is_regular_file(ec) || e.is_symlink(ec)) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // still running
    if (fs::remove(e.path(), ec)) removed.push_back(name);
  }
  for (const auto& name : removed)
    logger_.Info("Removed " + (options_.cache_dir / name).string() + " (left by a tuning run that was killed)");
}

std::string Builder::Key(const std::string& source) const {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
    h ^= 0xff;
    h *= 0x100000001b3ULL;
  };
  mix(options_.compiler);
  mix(compiler_version_);
  mix(machine_);
  for (const auto& f : options_.flags) mix(f);
  mix(source);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

bool LooksLikeInfrastructureFailure(const std::string& out) {
  for (const char* p : {"No space left on device", "File size limit exceeded", "Disk quota exceeded",
                        "Read-only file system", "internal compiler error", "signal terminated program",
                        "Cannot allocate memory", "out of memory", "virtual memory exhausted",
                        "cannot open output file", "Permission denied", "Input/output error", "Too many open files"})
    if (out.find(p) != std::string::npos) return true;
  return false;
}

std::string Builder::CheckToolchain(const std::string& known_good) {
  std::error_code ec;
  fs::create_directories(options_.cache_dir, ec);
  if (ec) return "cannot create kernel cache " + options_.cache_dir.string() + ": " + ec.message();
  BuildResult r = BuildOne(known_good + "\n// toolchain check " + std::to_string(getpid()) + "\n", false);
  if (r.ok) fs::remove(r.shared_object, ec);
  fs::remove(fs::path(r.shared_object).replace_extension(".cc"), ec);
  return r.ok ? "" : r.error;
}

BuildResult Builder::BuildOne(const std::string& source, bool use_cache) {
  BuildResult r;
  auto start = std::chrono::steady_clock::now();
  std::string key = Key(source);
  fs::path so = options_.cache_dir / (key + ".so");
  r.shared_object = so;
  std::error_code ec;
  if (use_cache && fs::exists(so, ec)) {
    // A cached object is used only when nobody else could have written it (docs/safety.md);
    // otherwise it is built again and the rename below replaces it.
    if (auto trusted = OpenPrivateCode(so); trusted.ok()) {
      r.ok = true;
      r.cached = true;
      return r;
    } else {
      logger_.Warning(trusted.status().message() + "; building it again");
    }
  }
  fs::path src = options_.cache_dir / (key + ".cc");
  if (Status st = WriteFileAtomic(src, source); !st.ok()) {
    r.error = st.message();
    r.infrastructure = true;
    return r;
  }
  // Compile to a private name, then rename: a concurrent tuner building the same key, or one
  // killed mid-compile, never leaves a half-written object under the final name.
  fs::path tmp =
      options_.cache_dir / (key + ".so.tmp" + std::to_string(getpid()) + "_" +
                            std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000));
  // Its own process group (Spawn), so that a timeout kills the compiler driver and its children
  // (cc1plus, as, ld) together.
  SpawnOptions compile;
  compile.argv = {options_.compiler};
  for (const auto& f : options_.flags) compile.argv.push_back(f);
  compile.argv.insert(compile.argv.end(), {src.string(), "-o", tmp.string()});
  compile.timeout_seconds = options_.timeout_seconds;
  compile.merge_stderr = true;
  compile.max_capture_bytes = 1u << 20;
  // A tuner killed (even with SIGKILL) takes its compilers with it: no orphaned cc1plus.
  compile.kill_with_parent = true;
  auto run = Spawn(compile);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!run.ok() || !run->ok()) {
    fs::remove(tmp, ec);
    if (!run.ok()) {
      r.error = run.status().message();
      r.infrastructure = true;
      return r;
    }
    if (run->end == ProcessResult::End::kTimedOut) {
      r.error = "compile timed out: " + options_.compiler + " " + run->Describe();
      return r;
    }
    const std::string& output = run->output;
    size_t cut = 0;
    for (int line = 0; line < 6 && cut != std::string::npos; ++line) cut = output.find('\n', cut + 1);
    r.error = output.substr(0, cut == std::string::npos ? output.size() : cut);
    if (r.error.empty()) r.error = "the compiler " + run->Describe();
    r.infrastructure = run->end == ProcessResult::End::kSignaled || LooksLikeInfrastructureFailure(output);
    return r;
  }
  // Nobody else may write an object this process loads (OpenPrivateCode), whatever the umask.
  fs::permissions(tmp, fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove, ec);
  fs::rename(tmp, so, ec);
  if (ec) {
    r.error = "cannot rename " + tmp.string() + ": " + ec.message();
    r.infrastructure = true;
    return r;
  }
  r.ok = true;
  return r;
}

std::vector<BuildResult> Builder::BuildAll(const std::vector<std::string>& sources) {
  std::vector<BuildResult> results(sources.size());
  std::error_code ec;
  fs::create_directories(options_.cache_dir, ec);
  if (ec) {
    for (auto& r : results) {
      r.error = "cannot create kernel cache " + options_.cache_dir.string() + ": " + ec.message();
      r.infrastructure = true;
    }
    return results;
  }
  if (sources.size() <= 1 || options_.parallel <= 1) {
    for (size_t i = 0; i < sources.size(); ++i) results[i] = BuildOne(sources[i]);
    return results;
  }
  ThreadPool pool(std::min<int>(options_.parallel, static_cast<int>(sources.size())));
  pool.ParallelFor(sources.size(), [&](int, size_t i) { results[i] = BuildOne(sources[i]); });
  return results;
}

}  // namespace portkit::tune
