#include "analyse/python_check.h"

#include <stdlib.h>

#include <filesystem>

#include "core/atomic_file.h"
#include "core/subprocess.h"

namespace portkit::analyse {
namespace fs = std::filesystem;

namespace {

// argv: folder, count. Compiles <i>.py; where that fails, <i>.orig.py too. Prints one line per
// failing input: index, "broken" (the original compiles) or "original" (it does not either),
// line, message.
constexpr const char* kScript = R"PY(
import os, sys
folder, count = sys.argv[1], int(sys.argv[2])
def check(path):
    try:
        with open(path, "rb") as f:
            source = f.read()
        compile(source, path, "exec", dont_inherit=True)
        return None
    except SyntaxError as e:
        return "%d\t%s" % (e.lineno or 0, e.msg)
    except Exception as e:
        return "0\t%s: %s" % (type(e).__name__, e)
out = []
for i in range(count):
    err = check(os.path.join(folder, "%d.py" % i))
    if err is None:
        continue
    orig = check(os.path.join(folder, "%d.orig.py" % i))
    out.append("%d\t%s\t%s" % (i, "broken" if orig is None else "original",
                               err.replace("\r", " ").replace("\n", " ")))
sys.stdout.write("".join(line + "\n" for line in out))
)PY";

// Removes the temporary folder on every path out.
struct TempDir {
  fs::path path;
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

Expected<std::vector<PythonCheckVerdict>> CompileWithPython(const std::vector<PythonCheckInput>& inputs,
                                                            const std::string& python) {
  std::vector<PythonCheckVerdict> verdicts(inputs.size());
  if (inputs.empty()) return verdicts;
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec) return IoError("no temporary folder for the Python check: " + ec.message());
  std::string templ = (base / "portkit-pycheck-XXXXXX").string();
  if (!mkdtemp(templ.data())) return IoError("cannot create a temporary folder under " + base.string());
  TempDir dir{templ};
  for (size_t i = 0; i < inputs.size(); ++i) {
    PORTKIT_RETURN_IF_ERROR(WriteFileAtomic(dir.path / (std::to_string(i) + ".py"), inputs[i].edited));
    PORTKIT_RETURN_IF_ERROR(WriteFileAtomic(dir.path / (std::to_string(i) + ".orig.py"), inputs[i].original));
  }
  SpawnOptions spawn;
  spawn.argv = {python, "-I", "-S", "-B", "-c", kScript, dir.path.string(), std::to_string(inputs.size())};
  spawn.timeout_seconds = 600;
  spawn.stderr_mode = ChildOutput::kCapture;
  auto run = Spawn(spawn);
  if (!run.ok()) return run.status();
  if (!run->ok())
    return Status(ErrorCode::kInternal, python + " " + run->Describe() +
                                            (run->error_output.empty() ? "" : ": " + run->error_output.substr(0, 500)));
  std::string_view out = run->output;
  while (!out.empty()) {
    size_t nl = out.find('\n');
    std::string_view line = out.substr(0, nl);
    out = nl == std::string_view::npos ? std::string_view() : out.substr(nl + 1);
    size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1), t3 = line.find('\t', t2 + 1);
    if (t3 == std::string_view::npos) continue;
    size_t index = std::stoul(std::string(line.substr(0, t1)));
    if (index >= verdicts.size()) continue;
    PythonCheckVerdict& v = verdicts[index];
    v.compiles = false;
    v.original_compiles = line.substr(t1 + 1, t2 - t1 - 1) == "broken";
    v.line = static_cast<uint32_t>(std::stoul(std::string(line.substr(t2 + 1, t3 - t2 - 1))));
    v.message = std::string(line.substr(t3 + 1));
  }
  return verdicts;
}

}  // namespace portkit::analyse
