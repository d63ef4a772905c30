/// libFuzzer target for the Python front end of `portkit analyse`:
/// parse (tree-sitter) -> SummariseModule (pass 1) -> ProjectIndex::Freeze -> FileWalker (pass 2).
///
/// Inputs the analyser itself would refuse to analyse (NUL bytes, invalid UTF-8; see
/// LoadPythonSource) are skipped, so every crash found here is reachable from `portkit analyse`.
/// Inputs up to 1 MiB (run_fuzz.sh passes -max_len=1048576 to this target): deep nesting needs
/// room (tests/fuzz/crashes/deep_parens_80k.py, 80,000 open brackets, broke tree-sitter).
/// Build and run: tests/fuzz/run_fuzz.sh (clang only).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "analyse/module_summary.h"
#include "analyse/project_index.h"
#include "analyse/python_syntax.h"
#include "analyse/source_files.h"
#include "analyse/walker.h"

namespace {

using namespace portkit::analyse;

class IgnoreEvents : public EventSink {
 public:
  void OnCall(const CallEvent& ev) override { sink_ += ev.args.size() + ev.lookup.size(); }
  void OnAttribute(const AttributeEvent& ev) override { sink_ += ev.qname.size(); }
  void OnString(const StringEvent& ev) override { sink_ += ev.value.size(); }
  size_t sink_ = 0;
};

const PySyntax& Syntax() {
  static const PySyntax* syntax = new PySyntax();
  return *syntax;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  // The same gate as LoadPythonSource: binary and non-UTF-8 files are never analysed.
  if (std::memchr(text.data(), '\0', text.size())) return 0;
  if (FirstInvalidUtf8(text).first != 0) return 0;

  const PySyntax& syn = Syntax();
  static PythonParser* parser = new PythonParser();
  // A BOM stays in the text (the parser leaves it out); absurd nesting is refused before
  // tree-sitter sees it (CheckNesting), as in `portkit analyse`.
  ParsedSource parsed = parser->Parse(std::move(text));
  if (!parsed.tree) return 0;

  // A module inside a package, so that relative imports (`from . import x`, `from .. import y`)
  // resolve to something.
  const std::string module = "pkg.sub.fuzzmod";
  ProjectIndex index;
  index.Add(std::make_unique<ModuleSummary>(SummariseModule(syn, parsed, module, false)));
  index.Freeze();
  const ModuleSummary* summary = index.Find(module);
  if (!summary) return 0;

  IgnoreEvents sink;
  auto known_external = [](const std::string& q) { return q.rfind("torch", 0) == 0; };
  FileWalker walker(syn, parsed, *summary, index, known_external, sink);
  walker.Run();
  return 0;
}
