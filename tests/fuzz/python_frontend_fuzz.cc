/// libFuzzer target for the Python front end of `portkit analyse`:
/// parse (tree-sitter) -> SummariseModule (pass 1) -> ProjectIndex::Freeze -> FileWalker (pass 2).
///
/// Inputs the analyser itself would refuse to analyse (NUL bytes, invalid UTF-8; see
/// LoadPythonSource) are skipped, so every crash found here is reachable from `portkit analyse`.
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

/// True when, somewhere in the tree, walking a node's named children with
/// ts_node_next_named_sibling stops before ts_node_named_child_count of them (tree-sitter 0.20
/// returns a null node after a zero-width child such as `(expression_statement (MISSING
/// identifier))`). module_summary.cc iterates that way and crashes on such trees; with
/// PORTKIT_FUZZ_SKIP_KNOWN=1 these inputs are skipped so fuzzing can reach other code.
bool SiblingWalkBreaks(TSNode root) {
  std::vector<TSNode> stack{root};
  while (!stack.empty()) {
    TSNode n = stack.back();
    stack.pop_back();
    uint32_t count = ts_node_named_child_count(n);
    TSNode c = count ? ts_node_named_child(n, 0) : TSNode{};
    for (uint32_t i = 0; i < count; ++i) {
      if (ts_node_is_null(c)) return true;
      stack.push_back(c);
      if (i + 1 < count) c = ts_node_next_named_sibling(c);
    }
  }
  return false;
}

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
  if (text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.replace(0, 3, "   ");

  const PySyntax& syn = Syntax();
  static PythonParser* parser = new PythonParser();
  ParsedSource parsed = parser->Parse(std::move(text));
  if (!parsed.tree) return 0;
  static const bool skip_known = std::getenv("PORTKIT_FUZZ_SKIP_KNOWN") != nullptr;
  if (skip_known && SiblingWalkBreaks(parsed.root())) return 0;

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
