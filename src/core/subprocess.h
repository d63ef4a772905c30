#pragma once
/// Child processes, in one place: spawning a program (compilers, the Python companion) and
/// running a function in a forked child (work that may crash or hang: foreign kernels, a C
/// library reading a corrupt file). Both give the same result type with the same rules: an
/// optional timeout that kills the child's whole process group, EINTR handled, output captured
/// up to a bound, and an exit / signal / timeout status that can be described to a user.
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace portkit {

/// How a child ended.
struct ProcessResult {
  enum class End { kExited, kSignaled, kTimedOut };
  End end = End::kExited;
  int exit_code = -1;  ///< valid when end == kExited
  int signal = 0;      ///< valid when end == kSignaled
  double timeout_seconds = 0;
  /// Spawn: the child's stdout (and stderr when merged). RunForked: the bytes it wrote to its
  /// report descriptor. Cut at the capture limit (`truncated` says so).
  std::string output;
  std::string error_output;  ///< Spawn with separate stderr capture
  bool truncated = false;
  double seconds = 0;  ///< wall time from start to reap

  bool ok() const { return end == End::kExited && exit_code == 0; }
  /// "exited with status 3", "killed by signal 11 (Segmentation fault)", "timed out after 10 s
  /// (killed)".
  std::string Describe() const;
};

enum class ChildOutput {
  kInherit,  ///< the parent's descriptor (the user sees it)
  kCapture,  ///< into ProcessResult::output / error_output
  kDiscard,  ///< /dev/null
};

struct SpawnOptions {
  std::vector<std::string> argv;  ///< argv[0] is looked up on PATH when it has no slash
  /// "NAME=VALUE" entries added to (or replacing in) the parent's environment.
  std::vector<std::string> env_set;
  std::vector<std::string> env_unset;  ///< names removed from the child's environment
  std::filesystem::path cwd;           ///< empty: the parent's
  double timeout_seconds = 0;          ///< <= 0: no limit
  ChildOutput stdout_mode = ChildOutput::kCapture;
  ChildOutput stderr_mode = ChildOutput::kCapture;
  bool merge_stderr = false;  ///< stderr goes where stdout goes
  bool stdin_null = true;     ///< false: the child inherits stdin
  size_t max_capture_bytes = 16u << 20;
  /// The program and everything it starts (a compiler driver's cc1plus, as, ld) die with this
  /// process, even when it is killed with SIGKILL: the program runs under a small guard process
  /// that leads its process group and gets PR_SET_PDEATHSIG; when the parent dies the guard kills
  /// the whole group (docs/safety.md, crash markers). The result is the program's own.
  bool kill_with_parent = false;
};

/// Runs a program to its end (or its timeout). Errors only when it cannot be started (not found,
/// not executable, no resources); any end of a started child, including a crash, is a result.
Expected<ProcessResult> Spawn(const SpawnOptions& options);

struct ForkOptions {
  double timeout_seconds = 0;  ///< <= 0: no limit
  /// In the child: no core file, and crash signals back to their default action so that a crash
  /// reads as a signal even where a sanitizer or a handler was installed.
  bool crash_quietly = true;
  size_t max_report_bytes = 64u << 20;
};

/// Runs `work(report_fd)` in a forked child and returns how it ended; what `work` wrote to
/// `report_fd` comes back in `output`. The child exits with `work`'s return value without running
/// destructors or atexit handlers. The child is its own process-group leader; a timeout kills the
/// group. Use for code that may crash or hang; the function runs on a copy-on-write snapshot of
/// the parent, so nothing it changes in memory comes back except through the report.
Expected<ProcessResult> RunForked(const std::function<int(int report_fd)>& work, const ForkOptions& options);

/// Writes all of `data` to `fd`, retrying on EINTR and short writes; false on error.
bool WriteAllToFd(int fd, const void* data, size_t size);

}  // namespace portkit
