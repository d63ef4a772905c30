#include "core/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

extern char** environ;

namespace portkit {
namespace {

using SteadyClock = std::chrono::steady_clock;

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

bool MakePipe(Fd* read_end, Fd* write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  *read_end = Fd(fds[0]);
  *write_end = Fd(fds[1]);
  return true;
}

/// Reads the given descriptors until every one reaches end of file or the deadline passes.
/// Returns false on timeout.
bool Drain(std::vector<std::pair<int, std::string*>> sources, SteadyClock::time_point deadline, bool has_deadline,
           size_t limit, bool* truncated) {
  char buf[65536];
  while (!sources.empty()) {
    int wait_ms = -1;
    if (has_deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
      if (left <= 0) return false;
      wait_ms = static_cast<int>(std::min<long long>(left, 1000));
    }
    std::vector<pollfd> polls;
    for (auto& [fd, _] : sources) polls.push_back({fd, POLLIN, 0});
    int ready = ::poll(polls.data(), polls.size(), wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return true;  // nothing more can be read; the caller reaps the child
    }
    if (ready == 0) continue;
    for (size_t i = polls.size(); i-- > 0;) {
      if (!(polls[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(polls[i].fd, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        sources.erase(sources.begin() + static_cast<long>(i));
        continue;
      }
      std::string* dst = sources[i].second;
      size_t room = dst->size() < limit ? limit - dst->size() : 0;
      if (static_cast<size_t>(n) > room) *truncated = true;
      dst->append(buf, std::min(room, static_cast<size_t>(n)));
    }
  }
  return true;
}

void KillGroup(pid_t pid) {
  // The child leads its own group: this reaches a compiler driver's cc1plus/as/ld too.
  if (::kill(-pid, SIGKILL) != 0) ::kill(pid, SIGKILL);
}

int Reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

void FillEnd(ProcessResult* r, int status, bool timed_out, double timeout) {
  r->timeout_seconds = timeout;
  if (timed_out) {
    r->end = ProcessResult::End::kTimedOut;
  } else if (status >= 0 && WIFSIGNALED(status)) {
    r->end = ProcessResult::End::kSignaled;
    r->signal = WTERMSIG(status);
  } else if (status >= 0 && WIFEXITED(status)) {
    r->end = ProcessResult::End::kExited;
    r->exit_code = WEXITSTATUS(status);
  } else {
    r->end = ProcessResult::End::kSignaled;  // lost: report as an abnormal end
    r->signal = 0;
  }
}

/// Reads the child's pipes to their end, waits for it within the timeout (killing its group when
/// the timeout passes first), reaps it and fills `result`.
void CollectChild(pid_t pid, std::vector<std::pair<int, std::string*>> sources, double timeout, size_t limit,
                  SteadyClock::time_point start, ProcessResult* result) {
  bool has_deadline = timeout > 0;
  auto deadline = start + std::chrono::duration_cast<SteadyClock::duration>(
                              std::chrono::duration<double>(has_deadline ? timeout : 0));
  bool timed_out = !Drain(std::move(sources), deadline, has_deadline, limit, &result->truncated);
  if (!timed_out && has_deadline) {
    // The pipes closed; the child may still run (it closed them itself): wait within what is
    // left of the deadline.
    while (true) {
      int status = 0;
      pid_t got = ::waitpid(pid, &status, WNOHANG);
      if (got == pid) {
        FillEnd(result, status, false, timeout);
        result->seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
        return;
      }
      if (got < 0 && errno != EINTR) break;
      if (SteadyClock::now() >= deadline) {
        timed_out = true;
        break;
      }
      ::usleep(1000);
    }
  }
  if (timed_out) KillGroup(pid);
  FillEnd(result, Reap(pid), timed_out, timeout);
  result->seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
}

std::vector<std::string> ChildEnvironment(const SpawnOptions& o) {
  std::map<std::string, std::string> env;
  std::vector<std::string> order;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    if (!env.count(name)) order.push_back(name);
    env[name] = entry;
  }
  for (const auto& name : o.env_unset) env.erase(name);
  for (const auto& entry : o.env_set) {
    std::string name = entry.substr(0, entry.find('='));
    if (!env.count(name)) order.push_back(name);
    env[name] = entry;
  }
  std::vector<std::string> out;
  for (const auto& name : order)
    if (auto it = env.find(name); it != env.end()) out.push_back(it->second);
  return out;
}

// The guard of a kill_with_parent child: its parent died, so it ends its whole group (itself, the
// program and the program's children). Async-signal-safe.
void GuardParentDied(int) { ::kill(0, SIGKILL); }

// Where execve finds argv[0]: as given when it names a path, else the first executable file of
// that name on PATH; "" when there is none.
std::string ResolveProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

// Spawn with kill_with_parent: fork a guard (group leader, PR_SET_PDEATHSIG = SIGTERM, whose
// handler kills the group), which forks the program and passes its end on as its own. Only
// async-signal-safe calls between fork and exec: everything is prepared before.
Expected<ProcessResult> SpawnGuarded(const SpawnOptions& o, const std::vector<std::string>& env, Fd out_r, Fd out_w,
                                     Fd err_r, Fd err_w, SteadyClock::time_point start) {
  std::string program = ResolveProgram(o.argv[0]);
  if (program.empty()) return Status(ErrorCode::kNotFound, "cannot run " + o.argv[0] + ": " + std::strerror(ENOENT));
  std::vector<char*> args;
  for (const auto& a : o.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_copy = env;
  std::vector<char*> envp;
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);
  bool capture_out = o.stdout_mode == ChildOutput::kCapture;
  bool capture_err = !o.merge_stderr && o.stderr_mode == ChildOutput::kCapture;
  Fd dev_null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  Fd exec_r, exec_w;  // the program's errno when execve fails; closed (EOF) when it succeeds
  if (dev_null.get() < 0 || !MakePipe(&exec_r, &exec_w))
    return Status(ErrorCode::kInternal, std::string("cannot prepare a child: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Status(ErrorCode::kInternal, std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // The guard.
    ::setpgid(0, 0);
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig == SIGKILL || sig == SIGSTOP) continue;
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(sig, &dfl, nullptr);
    }
    int in_fd = o.stdin_null ? dev_null.get() : 0;
    int out_fd = capture_out ? out_w.get() : o.stdout_mode == ChildOutput::kDiscard ? dev_null.get() : 1;
    int err_fd = o.merge_stderr                           ? out_fd
                 : capture_err                            ? err_w.get()
                 : o.stderr_mode == ChildOutput::kDiscard ? dev_null.get()
                                                          : 2;
    // Copies above 2 first, so that dup2 onto 0..2 never overwrites one still needed; then the
    // report pipe goes to 3 and nothing else is kept (another thread's pipes must not stay open
    // in a long-lived guard).
    int moved_in = ::fcntl(in_fd, F_DUPFD, 3), moved_out = ::fcntl(out_fd, F_DUPFD, 3),
        moved_err = ::fcntl(err_fd, F_DUPFD, 3);
    if (moved_in < 0 || moved_out < 0 || moved_err < 0) ::_exit(127);
    ::dup2(moved_in, 0);
    ::dup2(moved_out, 1);
    ::dup2(moved_err, 2);
    const int report = 3;
    if (exec_w.get() != report && ::dup2(exec_w.get(), report) < 0) ::_exit(127);
    ::fcntl(report, F_SETFD, FD_CLOEXEC);
    ::close_range(report + 1, ~0u, 0);
    if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) {
      int e = errno;
      (void)!::write(report, &e, sizeof e);
      ::_exit(127);
    }
    struct sigaction on_death {};
    on_death.sa_handler = GuardParentDied;
    ::sigaction(SIGTERM, &on_death, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::kill(0, SIGKILL);  // the parent died before prctl
    pid_t child = ::fork();
    if (child == 0) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(SIGTERM, &dfl, nullptr);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(program.c_str(), args.data(), envp.data());
      int e = errno;
      (void)!::write(report, &e, sizeof e);
      ::_exit(127);
    }
    ::close(report);
    if (child < 0) ::_exit(127);
    sigset_t term_only;
    sigfillset(&term_only);
    sigdelset(&term_only, SIGTERM);
    ::sigprocmask(SIG_SETMASK, &term_only, nullptr);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0) {
      if (errno != EINTR) ::_exit(127);
    }
    if (WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
    // The program died of a signal: the guard dies of the same one (no core file of its own).
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
    struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::kill(::getpid(), sig);
    ::_exit(128 + sig);
  }
  ::setpgid(pid, pid);
  out_w.reset();
  err_w.reset();
  exec_w.reset();
  dev_null.reset();
  int exec_errno = 0;
  ssize_t got;
  while ((got = ::read(exec_r.get(), &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    Reap(pid);
    return Status(exec_errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                  "cannot run " + o.argv[0] + ": " + std::strerror(exec_errno));
  }
  ProcessResult result;
  std::vector<std::pair<int, std::string*>> sources;
  if (capture_out) sources.push_back({out_r.get(), &result.output});
  if (capture_err) sources.push_back({err_r.get(), &result.error_output});
  CollectChild(pid, std::move(sources), o.timeout_seconds, o.max_capture_bytes, start, &result);
  return result;
}

}  // namespace

std::string ProcessResult::Describe() const {
  switch (end) {
    case End::kExited: return "exited with status " + std::to_string(exit_code);
    case End::kSignaled:
      if (signal == 0) return "ended abnormally (status lost)";
      return "killed by signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
    case End::kTimedOut: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", timeout_seconds);
      return std::string("timed out after ") + buf + " s (killed)";
    }
  }
  return "ended";
}

bool WriteAllToFd(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

Expected<ProcessResult> Spawn(const SpawnOptions& o) {
  if (o.argv.empty() || o.argv[0].empty()) return InvalidArgument("no program to run");
  auto start = SteadyClock::now();
  Fd out_r, out_w, err_r, err_w;
  bool capture_out = o.stdout_mode == ChildOutput::kCapture;
  bool capture_err = !o.merge_stderr && o.stderr_mode == ChildOutput::kCapture;
  if ((capture_out && !MakePipe(&out_r, &out_w)) || (capture_err && !MakePipe(&err_r, &err_w)))
    return Status(ErrorCode::kInternal, std::string("cannot create a pipe: ") + std::strerror(errno));
  if (o.kill_with_parent)
    return SpawnGuarded(o, ChildEnvironment(o), std::move(out_r), std::move(out_w), std::move(err_r), std::move(err_w),
                        start);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (o.stdin_null) posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (capture_out) posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  else if (o.stdout_mode == ChildOutput::kDiscard)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  if (o.merge_stderr) posix_spawn_file_actions_adddup2(&actions, 1, 2);
  else if (capture_err) posix_spawn_file_actions_adddup2(&actions, err_w.get(), 2);
  else if (o.stderr_mode == ChildOutput::kDiscard)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  if (!o.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, o.cwd.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  posix_spawnattr_setflags(&attr, flags);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);

  std::vector<char*> args;
  for (const auto& a : o.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env = ChildEnvironment(o);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::fflush(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  out_w.reset();
  err_w.reset();
  if (rc != 0)
    return Status(rc == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                  "cannot run " + o.argv[0] + ": " + std::strerror(rc));

  ProcessResult result;
  std::vector<std::pair<int, std::string*>> sources;
  if (capture_out) sources.push_back({out_r.get(), &result.output});
  if (capture_err) sources.push_back({err_r.get(), &result.error_output});
  CollectChild(pid, std::move(sources), o.timeout_seconds, o.max_capture_bytes, start, &result);
  return result;
}

Expected<ProcessResult> RunForked(const std::function<int(int report_fd)>& work, const ForkOptions& o) {
  auto start = SteadyClock::now();
  Fd rd, wr;
  if (!MakePipe(&rd, &wr))
    return Status(ErrorCode::kInternal, std::string("cannot create a pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Status(ErrorCode::kInternal, std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    if (o.crash_quietly) {
      struct rlimit no_core = {0, 0};
      ::setrlimit(RLIMIT_CORE, &no_core);
      for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
    }
    rd.reset();
    int rc = work(wr.get());
    std::fflush(nullptr);
    ::_exit(rc);
  }
  // Also set from this side, so that a timeout right after fork still finds the group.
  ::setpgid(pid, pid);
  wr.reset();
  ProcessResult result;
  CollectChild(pid, {{rd.get(), &result.output}}, o.timeout_seconds, o.max_report_bytes, start, &result);
  return result;
}

}  // namespace portkit
