#include "tune/companion.h"

#include <cstdlib>

#include "core/context.h"
#include "core/subprocess.h"

namespace portkit::tune {

std::string CompanionInterpreter(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("PORTKIT_PYTHON");
  return env && *env ? env : "python3";
}

Expected<CompanionRun> RunCompanion(std::vector<std::string> argv, const std::string& describe) {
  CompanionRun run;
  run.python = argv.empty() ? std::string() : argv.front();
  run.argv = std::move(argv);
  SpawnOptions spawn;
  spawn.argv = run.argv;
  if (std::string env = CompanionPythonPathEnv(); !env.empty()) spawn.env_set.push_back(env);
  spawn.stdout_mode = ChildOutput::kInherit;
  spawn.stderr_mode = ChildOutput::kInherit;
  auto result = Spawn(spawn);
  if (!result.ok()) return result.status();
  run.process = std::move(*result);
  // The companion exits with 2 when it refuses its model, input or description (its usage
  // errors); it has said why on stderr.
  constexpr int kCompanionRefused = 2;
  if (run.process.ok()) {
    run.end = CompanionEnd::kOk;
  } else if (run.process.end == ProcessResult::End::kExited && run.process.exit_code == kCompanionRefused) {
    run.end = CompanionEnd::kRefused;
  } else {
    run.end = CompanionEnd::kFailed;
    run.failure = describe + " " + run.process.Describe();
  }
  return run;
}

}  // namespace portkit::tune
