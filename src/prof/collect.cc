// `prof collect`: run a Python program under the PyTorch profiler through the companion's
// launcher (python -m portkit.prof_launch), with no change to the program's code.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>

#include "prof/api.h"

namespace portkit::prof {
namespace fs = std::filesystem;
namespace {

/// Splits a shell-like command line on spaces, honouring single and double quotes.
std::vector<std::string> SplitCommand(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  bool any = false;
  for (char c : line) {
    if (quote) {
      if (c == quote) quote = 0;
      else cur.push_back(c);
    } else if (c == '\'' || c == '"') {
      quote = c;
      any = true;
    } else if (c == ' ' || c == '\t') {
      if (any || !cur.empty()) out.push_back(cur), cur.clear(), any = false;
    } else {
      cur.push_back(c);
    }
  }
  if (any || !cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace

Expected<std::vector<std::string>> CollectArgv(const CollectOptions& options) {
  std::vector<std::string> command = options.application.empty() ? options.command : SplitCommand(options.application);
  if (command.empty())
    return InvalidArgument("no program to profile: give it after -- (portkit prof collect --output=DIR -- python "
                           "train.py) or as --application=\"python train.py\"");
  std::string exe = fs::path(command[0]).filename().string();
  if (exe.rfind("python", 0) != 0)
    return InvalidArgument("the command must start with a Python interpreter (python, python3, /usr/bin/python3 "
                           "...); got '" + command[0] + "'");
  // Interpreter options before the script (-u, -X ...) stay in front of the launcher.
  std::vector<std::string> argv = {command[0]};
  size_t i = 1;
  while (i < command.size() && command[i].size() > 1 && command[i][0] == '-' && command[i] != "-m") {
    argv.push_back(command[i]);
    if ((command[i] == "-X" || command[i] == "-W") && i + 1 < command.size()) argv.push_back(command[++i]);
    ++i;
  }
  if (i >= command.size()) return InvalidArgument("no script or -m module in the command");
  argv.push_back("-m");
  argv.push_back("portkit.prof_launch");
  for (; i < command.size(); ++i) argv.push_back(command[i]);
  return argv;
}

Expected<CollectReport> RunCollect(const CollectOptions& options, Context& ctx) {
  if (options.steps < 0) return InvalidArgument("--steps must be 0 (the whole run) or more");
  auto argv = CollectArgv(options);
  if (!argv.ok()) return argv.status();
  CollectReport report;
  report.argv = std::move(*argv);

  std::time_t now = std::chrono::system_clock::to_time_t(ctx.clock());
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", &tm);
  report.prof_dir = fs::absolute(options.output) / (std::string("PROF_") + stamp + "_" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(report.prof_dir, ec);
  if (ec) return IoError("cannot create " + report.prof_dir.string() + ": " + ec.message());

  SpawnOptions spawn;
  spawn.argv = report.argv;
  spawn.env_set = {
      "PORTKIT_PROF_OUT=" + report.prof_dir.string(),
      "PORTKIT_PROF_STEPS=" + std::to_string(options.steps),
      std::string("PORTKIT_PROF_RECORD_SHAPES=") + (options.record_shapes ? "1" : "0"),
      std::string("PORTKIT_PROF_WITH_STACK=") + (options.with_stack ? "1" : "0"),
  };
  // The companion package's folder first on PYTHONPATH; none found: the interpreter's own
  // (pip-installed) portkit.
  std::string pythonpath = FindPythonDir().string();
  const char* old_path = std::getenv("PYTHONPATH");
  if (old_path && *old_path) pythonpath += (pythonpath.empty() ? "" : ":") + std::string(old_path);
  if (!pythonpath.empty()) spawn.env_set.push_back("PYTHONPATH=" + pythonpath);
  spawn.stdout_mode = ChildOutput::kInherit;
  spawn.stderr_mode = ChildOutput::kInherit;
  spawn.stdin_null = false;  // the program may read its stdin
  std::string shown;
  for (const auto& a : report.argv) shown += (shown.empty() ? "" : " ") + a;
  ctx.logger.Info("Profiling: " + shown);
  auto result = Spawn(spawn);
  if (!result.ok()) return result.status();
  report.program = std::move(*result);
  const auto importers = MakeImporters();
  for (const auto& e : fs::directory_iterator(report.prof_dir, ec))
    if (e.is_regular_file(ec) && DetectImporter(importers, ReadFirstBytes(e.path()))) ++report.traces;
  return report;
}

}  // namespace portkit::prof
