#include "tune/builder.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/atomic_file.h"
#include "core/thread_pool.h"
#include "tune/knowledge_base.h"

extern char** environ;

namespace portkit::tune {
namespace fs = std::filesystem;

int RunProcess(const std::vector<std::string>& argv, std::string* output, int timeout_seconds) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  // Its own process group, so that a timeout kills the compiler driver and its children (cc1plus,
  // as, ld) together.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    if (output) *output = "cannot run " + argv[0];
    return -1;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  bool timed_out = false;
  char buf[4096];
  while (true) {
    int wait_ms = -1;
    if (timeout_seconds > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<long long>(left.count(), 1000));
    }
    pollfd p{fds[0], POLLIN, 0};
    int ready = poll(&p, 1, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (ready == 0) continue;
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (output) output->append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (timed_out) {
    if (output) *output = argv[0] + " did not finish within " + std::to_string(timeout_seconds) + " s (killed)";
    return kTimedOut;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Builder::Builder(BuildOptions options, Logger& logger) : options_(std::move(options)), logger_(logger) {
  std::string out;
  if (RunProcess({options_.compiler, "--version"}, &out, 60) == 0) {
    compiler_version_ = out.substr(0, out.find('\n'));
  }
  // -march=native code is only valid on this CPU: its model and SIMD flags are part of the key.
  machine_ = Validators(compiler_version_, "");
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

BuildResult Builder::BuildOne(const std::string& source) {
  BuildResult r;
  auto start = std::chrono::steady_clock::now();
  std::string key = Key(source);
  fs::path so = options_.cache_dir / (key + ".so");
  r.shared_object = so;
  std::error_code ec;
  if (fs::exists(so, ec)) {
    r.ok = true;
    r.cached = true;
    return r;
  }
  fs::path src = options_.cache_dir / (key + ".cc");
  if (Status st = WriteFileAtomic(src, source); !st.ok()) {
    r.error = st.message();
    return r;
  }
  // Compile to a private name, then rename: a concurrent tuner building the same key, or one
  // killed mid-compile, never leaves a half-written object under the final name.
  fs::path tmp = options_.cache_dir / (key + ".so.tmp" + std::to_string(getpid()) + "_" +
                                       std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000));
  std::vector<std::string> argv = {options_.compiler};
  for (const auto& f : options_.flags) argv.push_back(f);
  argv.insert(argv.end(), {src.string(), "-o", tmp.string()});
  std::string output;
  int rc = RunProcess(argv, &output, options_.timeout_seconds);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rc != 0) {
    fs::remove(tmp, ec);
    size_t cut = 0;
    for (int line = 0; line < 6 && cut != std::string::npos; ++line) cut = output.find('\n', cut + 1);
    r.error = output.substr(0, cut == std::string::npos ? output.size() : cut);
    if (r.error.empty()) r.error = "the compiler exited with status " + std::to_string(rc);
    if (rc == kTimedOut) r.error = "compile timed out: " + output;
    return r;
  }
  fs::rename(tmp, so, ec);
  if (ec) {
    r.error = "cannot rename " + tmp.string() + ": " + ec.message();
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
    for (auto& r : results) r.error = "cannot create kernel cache " + options_.cache_dir.string() + ": " + ec.message();
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
