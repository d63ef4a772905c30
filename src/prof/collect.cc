// `prof collect`: run a Python program under the PyTorch profiler through the companion's
// launcher (python -m portkit.prof_launch), with no change to the program's code.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>

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

/// The interpreter a console script (torchrun) runs under: its `#!` line, else python3.
std::string ScriptInterpreter(const std::string& program) {
  fs::path path = program;
  if (program.find('/') == std::string::npos) {
    const char* env = std::getenv("PATH");
    std::string dirs = env ? env : "";
    for (size_t at = 0; at <= dirs.size();) {
      size_t end = dirs.find(':', at);
      if (end == std::string::npos) end = dirs.size();
      fs::path candidate = fs::path(dirs.substr(at, end - at)) / program;
      if (end > at && ::access(candidate.c_str(), X_OK) == 0) {
        path = candidate;
        break;
      }
      at = end + 1;
    }
  }
  std::ifstream in(path);
  std::string line;
  if (in && std::getline(in, line) && line.rfind("#!", 0) == 0) {
    std::string interp = line.substr(2);
    while (!interp.empty() && interp.front() == ' ') interp.erase(0, 1);
    interp = interp.substr(0, interp.find(' '));  // "#!/usr/bin/env python3" is handled below
    if (fs::path(interp).filename().string().rfind("python", 0) == 0) return interp;
    if (fs::path(interp).filename() == "env") {
      std::string rest = line.substr(line.find("env") + 3);
      while (!rest.empty() && rest.front() == ' ') rest.erase(0, 1);
      rest = rest.substr(0, rest.find(' '));
      if (rest.rfind("python", 0) == 0) return rest;
    }
  }
  return "python3";
}

/// torchrun's options that take a value as the next word (`--nproc_per_node 2`); the rest are
/// flags, and `--opt=value` is one word.
bool TorchrunOptionTakesValue(const std::string& opt) {
  static const char* const kWithValue[] = {"--nnodes",
                                           "--nproc_per_node",
                                           "--nproc-per-node",
                                           "--rdzv_backend",
                                           "--rdzv-backend",
                                           "--rdzv_endpoint",
                                           "--rdzv-endpoint",
                                           "--rdzv_id",
                                           "--rdzv-id",
                                           "--rdzv_conf",
                                           "--rdzv-conf",
                                           "--max_restarts",
                                           "--max-restarts",
                                           "--monitor_interval",
                                           "--monitor-interval",
                                           "--start_method",
                                           "--start-method",
                                           "--role",
                                           "--node_rank",
                                           "--node-rank",
                                           "--master_addr",
                                           "--master-addr",
                                           "--master_port",
                                           "--master-port",
                                           "--local_addr",
                                           "--local-addr",
                                           "--log_dir",
                                           "--log-dir",
                                           "-r",
                                           "--redirects",
                                           "-t",
                                           "--tee",
                                           "--local_ranks_filter",
                                           "--local-ranks-filter",
                                           "--logs_specs",
                                           "--logs-specs",
                                           "--rdzv_timeout"};
  for (const char* o : kWithValue)
    if (opt == o) return true;
  return false;
}

/// `torchrun [OPTS] SCRIPT|-m MODULE [ARGS]` → `PYTHON -m torch.distributed.run [OPTS] -m
/// portkit.prof_launch SCRIPT|-m MODULE [ARGS]`: every worker runs the program under the launcher
/// (torchrun's own `-m` runs the launcher as a module), and each writes its own trace with its rank.
Expected<std::vector<std::string>> TorchrunArgv(const std::vector<std::string>& command, size_t first) {
  std::vector<std::string> argv = {ScriptInterpreter(command[0]), "-m", "torch.distributed.run"};
  bool module = false;
  size_t i = first;
  for (; i < command.size(); ++i) {
    const std::string& a = command[i];
    if (a.empty() || a[0] != '-') break;
    if (a == "--no_python" || a == "--no-python")
      return InvalidArgument(
          "torchrun --no-python runs a program that is not Python; prof collect profiles Python "
          "programs through the PyTorch profiler");
    if (a == "-m" || a == "--module") {
      module = true;
      continue;
    }
    argv.push_back(a);
    if (a.find('=') == std::string::npos && TorchrunOptionTakesValue(a) && i + 1 < command.size())
      argv.push_back(command[++i]);
  }
  if (i >= command.size()) return InvalidArgument("no training script in the torchrun command");
  argv.insert(argv.end(), {"-m", "portkit.prof_launch"});
  if (module) argv.push_back("-m");
  for (; i < command.size(); ++i) argv.push_back(command[i]);
  return argv;
}

}  // namespace

Expected<std::vector<std::string>> CollectArgv(const CollectOptions& options) {
  std::vector<std::string> command = options.application.empty() ? options.command : SplitCommand(options.application);
  if (command.empty())
    return InvalidArgument(
        "no program to profile: give it after -- (portkit prof collect --output=DIR -- python "
        "train.py) or as --application=\"python train.py\"");
  std::string exe = fs::path(command[0]).filename().string();
  if (exe == "torchrun") return TorchrunArgv(command, 1);
  // python -m torch.distributed.run / torch.distributed.launch: the same, with this interpreter.
  if (exe.rfind("python", 0) == 0 && command.size() > 2 && command[1] == "-m" &&
      (command[2] == "torch.distributed.run" || command[2] == "torch.distributed.launch")) {
    auto argv = TorchrunArgv(command, 3);
    if (!argv.ok()) return argv.status();
    (*argv)[0] = command[0];
    (*argv)[2] = command[2];
    return argv;
  }
  if (exe.rfind("python", 0) != 0)
    return InvalidArgument(
        "the command must start with a Python interpreter (python, python3, /usr/bin/python3 "
        "...) or torchrun; got '" +
        command[0] + "'");
  // Interpreter options before the script (-u, -X ...) stay in front of the launcher.
  std::vector<std::string> argv = {command[0]};
  size_t i = 1;
  while (i < command.size() && command[i].size() > 1 && command[i][0] == '-' && command[i] != "-m" &&
         command[i] != "-c") {
    argv.push_back(command[i]);
    if ((command[i] == "-X" || command[i] == "-W") && i + 1 < command.size()) argv.push_back(command[++i]);
    ++i;
  }
  if (i >= command.size()) return InvalidArgument("no script, -m module or -c command in the command");
  if (command[i] == "-c" && i + 1 >= command.size()) return InvalidArgument("-c needs the code to run");
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
  if (std::string env = CompanionPythonPathEnv(); !env.empty()) spawn.env_set.push_back(env);
  spawn.stdout_mode = ChildOutput::kInherit;
  spawn.stderr_mode = ChildOutput::kInherit;
  spawn.stdin_null = false;  // the program may read its stdin
  std::string shown;
  for (const auto& a : report.argv) shown += (shown.empty() ? "" : " ") + a;
  ctx.logger.Info("Profiling: " + shown);
  auto result = Spawn(spawn);
  if (!result.ok()) {
    fs::remove(report.prof_dir, ec);  // only when empty
    return result.status();
  }
  report.program = std::move(*result);
  const auto importers = MakeImporters();
  for (const auto& e : fs::directory_iterator(report.prof_dir, ec))
    if (e.is_regular_file(ec) && DetectImporter(importers, ReadFirstBytes(e.path()))) ++report.traces;
  // A run that wrote nothing leaves no empty PROF_* folder behind (remove() takes only an empty one).
  if (report.traces == 0 && fs::is_empty(report.prof_dir, ec)) fs::remove(report.prof_dir, ec);
  return report;
}

}  // namespace portkit::prof
