#include "analyse/dynamic_shape.h"

#include <algorithm>
#include <cctype>

#include "analyse/rules/affinity_apis/rules.h"
#include "analyse/walker.h"
#include "core/atomic_file.h"
#include "core/input_files.h"

namespace portkit::analyse {
namespace fs = std::filesystem;
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool LoaderLikeName(const std::string& dotted) {
  std::string last = Lower(dotted.substr(dotted.rfind('.') + 1));
  return last.find("loader") != std::string::npos || last.find("prefetch") != std::string::npos;
}

// Names a candidate loop that is not wrapped is logged for, when no loop is found at all.
bool DataLikeText(std::string_view text) {
  std::string t = Lower(std::string(text));
  for (const char* w : {"loader", "prefetch", "data", "batch", "sampler", "pbar", "iter"})
    if (t.find(w) != std::string::npos) return true;
  return false;
}

// Builtins that take an iterable (or its length) but return no data to loop over.
bool ReturnsNoData(std::string_view callee) {
  for (const char* n : {"len", "range", "print", "str", "repr", "int", "float", "bool", "isinstance", "hasattr",
                        "getattr", "setattr", "type", "id", "sum", "min", "max", "any", "all"})
    if (callee == n) return true;
  return false;
}

/// The data-pipeline class (a Dataset, Sampler or loader/prefetcher class, by its name or a base's)
/// that encloses `n`, or "" when none does: loops in such classes fetch samples, they are not
/// the training loop.
std::string DataPipelineClass(const PySyntax& syn, TSNode n, std::string_view src) {
  auto pipeline_name = [](std::string_view dotted) {
    std::string last = Lower(std::string(dotted.substr(dotted.rfind('.') + 1)));
    auto ends = [&](std::string_view suffix) {
      return last.size() >= suffix.size() && last.compare(last.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return ends("dataset") || ends("sampler") || LoaderLikeName(last);
  };
  for (TSNode p = ts_node_parent(n); !ts_node_is_null(p); p = ts_node_parent(p)) {
    if (syn.Kind(p) != NodeKind::kClassDefinition) continue;
    std::string name(NodeText(ts_node_child_by_field_id(p, syn.f_name), src));
    // `class TestCombinedDataLoader(unittest.TestCase)` tests a loader; it is none.
    if (pipeline_name(name) && Lower(name).rfind("test", 0) != 0) return name;
    TSNode bases = ts_node_child_by_field_id(p, syn.f_superclasses);
    if (!ts_node_is_null(bases))
      for (TSNode b : NamedChildren(bases))
        if (syn.Kind(b) != NodeKind::kKeywordArgument && pipeline_name(NodeText(b, src))) return name;
  }
  return {};
}

class LoopFinder : public EventSink {
 public:
  LoopFinder(const PySyntax& syn, std::string_view src, std::vector<WrappedLoop>& out,
             std::vector<RejectedLoop>* rejected)
      : syn_(syn), src_(src), out_(out), rejected_(rejected) {}
  void OnCall(const CallEvent&) override {}
  void OnAttribute(const AttributeEvent&) override {}
  void OnString(const StringEvent&) override {}

  /// Iterators made from a loader and kept for `next()` (`self._data_loader_iter =
  /// iter(self.data_loader)` in a trainer; `it = iter(loader)` with `next(it)` in its function):
  /// the loader is wrapped where the iterator is made, since the loop is a `next()` per step.
  void FindIteratorsForNext(TSNode root) {
    ForEachNamedNode(root, [&](TSNode c) {
      if (syn_.Kind(c) != NodeKind::kAssignment) return true;
      TSNode left = ts_node_child_by_field_id(c, syn_.f_left);
      TSNode right = ts_node_child_by_field_id(c, syn_.f_right);
      if (ts_node_is_null(right) || syn_.Kind(right) != NodeKind::kCall) return true;
      if (NodeText(ts_node_child_by_field_id(right, syn_.f_function), src_) != "iter") return true;
      std::vector<TSNode> args = NamedChildren(ts_node_child_by_field_id(right, syn_.f_arguments));
      if (args.size() != 1 || syn_.Kind(args[0]) == NodeKind::kKeywordArgument) return true;
      std::string_view arg_text = NodeText(args[0], src_);
      if (arg_text.find("DETECTOR.start") != std::string_view::npos || !IsDataExpression(args[0], 0)) return true;
      NodeKind lk = syn_.Kind(left);
      bool kept_for_next = false;
      if (lk == NodeKind::kAttribute) {
        kept_for_next = true;  // stored on an object: read by next() in another method
      } else if (lk == NodeKind::kIdentifier) {
        TSNode scope = affinity::EnclosingScope(syn_, c);
        std::string needle = "next(" + std::string(NodeText(left, src_));
        std::string_view scope_text = ts_node_is_null(scope) ? src_ : NodeText(scope, src_);
        for (size_t at = scope_text.find(needle); at != std::string_view::npos && !kept_for_next;
             at = scope_text.find(needle, at + 1)) {
          char after = at + needle.size() < scope_text.size() ? scope_text[at + needle.size()] : ')';
          kept_for_next = !(std::isalnum(static_cast<unsigned char>(after)) || after == '_');
        }
      }
      if (!kept_for_next) return true;
      std::string pipeline = DataPipelineClass(syn_, c, src_);
      if (!pipeline.empty()) {
        Reject(c, arg_text,
               "inside the data-pipeline class " + pipeline + " (it fetches samples; it is not the training loop)");
        return true;
      }
      WrappedLoop loop;
      loop.line = StartLine(c);
      loop.start_byte = ts_node_start_byte(args[0]);
      loop.end_byte = ts_node_end_byte(args[0]);
      loop.iterable = std::string(arg_text);
      loop.module_level = false;
      loop.at_iterator = true;
      wrapped_iters_.push_back(ts_node_start_byte(right));
      out_.push_back(std::move(loop));
      return true;
    });
  }

  void OnFor(TSNode for_node, TSNode iterable, const Value& value) override {
    TSNode right = ts_node_child_by_field_id(for_node, syn_.f_right);
    if (ts_node_is_null(right)) return;
    std::string_view text = NodeText(right, src_);
    if (text.find("DETECTOR.start") != std::string_view::npos) return;  // already wrapped
    reached_wrapped_iter_ = false;
    bool data = IsDataLoop(right, iterable, value);
    if (reached_wrapped_iter_) return;  // wrapped where its iterator is made
    if (data) {
      std::string pipeline = DataPipelineClass(syn_, for_node, src_);
      if (!pipeline.empty()) {
        Reject(for_node, text,
               "inside the data-pipeline class " + pipeline + " (it fetches samples; it is not the training loop)");
        return;
      }
    } else {
      if (DataLikeText(text)) Reject(for_node, text, WhyNotData(right));
      return;
    }
    WrappedLoop loop;
    loop.line = StartLine(for_node);
    loop.start_byte = ts_node_start_byte(right);
    loop.end_byte = ts_node_end_byte(right);
    loop.iterable = std::string(text);
    TSNode parent = ts_node_parent(for_node);
    loop.module_level = !ts_node_is_null(parent) && syn_.Kind(parent) == NodeKind::kModule;
    out_.push_back(std::move(loop));
  }

 private:
  void Reject(TSNode n, std::string_view iterable, std::string reason) {
    if (rejected_) rejected_->push_back({StartLine(n), std::string(iterable), std::move(reason)});
  }

  std::string WhyNotData(TSNode right) const {
    TSNode n = right;
    if (syn_.Kind(n) == NodeKind::kIdentifier) {
      TSNode bound = affinity::PreviousBinding(syn_, src_, affinity::EnclosingScope(syn_, n), NodeText(n, src_),
                                               ts_node_start_byte(n));
      if (ts_node_is_null(bound))
        return "`" + std::string(NodeText(n, src_)) + "` is not bound in its function to a loader or a wrapper of one";
      return "`" + std::string(NodeText(n, src_)) + "` is bound to `" + std::string(NodeText(bound, src_)) +
             "`, which is not a loader or a wrapper of one";
    }
    return "neither a DataLoader, a loader-like name, nor a call that takes one as its first argument";
  }

  bool IsDataLoop(TSNode right, TSNode iterable, const Value& value) {
    // The whole iterable first: it may reach an iterator already wrapped where it was made.
    if (IsDataExpression(right, 0) || IsDataExpression(iterable, 0)) return true;
    if (value.kind == ValueKind::kInstance && value.name.size() >= 10 &&
        value.name.compare(value.name.size() - 10, 10, "DataLoader") == 0)
      return true;
    if (value.kind == ValueKind::kUserInstance && value.cls && LoaderLikeName(value.cls->name)) return true;
    return false;
  }

  // By syntax: a loader-like name, a call of one, a call that takes one as its first positional
  // argument (enumerate, tqdm, iter, a project's own progress bar; any argument of zip), or a
  // name last bound in its function to any of these, through any chain of re-bindings
  // (`pbar = enumerate(train_loader)`; `pbar = ProgressBar(pbar, total=nb)`; `for ... in pbar:`).
  bool IsDataExpression(TSNode n, int depth) {
    if (ts_node_is_null(n) || depth > 8) return false;
    NodeKind k = syn_.Kind(n);
    if (k == NodeKind::kParenthesizedExpression && ts_node_named_child_count(n) == 1)
      return IsDataExpression(ts_node_named_child(n, 0), depth);
    if (k == NodeKind::kIdentifier || k == NodeKind::kAttribute) {
      if (LoaderLikeName(DottedText(syn_, n, src_))) return true;
      if (k != NodeKind::kIdentifier) return false;
      TSNode bound = affinity::PreviousBinding(syn_, src_, affinity::EnclosingScope(syn_, n), NodeText(n, src_),
                                               ts_node_start_byte(n));
      return IsDataExpression(bound, depth + 1);
    }
    if (k != NodeKind::kCall) return false;
    if (std::find(wrapped_iters_.begin(), wrapped_iters_.end(), ts_node_start_byte(n)) != wrapped_iters_.end()) {
      reached_wrapped_iter_ = true;
      return true;
    }
    std::string callee = DottedText(syn_, ts_node_child_by_field_id(n, syn_.f_function), src_);
    if (LoaderLikeName(callee)) return true;
    std::string last = callee.substr(callee.rfind('.') + 1);
    if (ReturnsNoData(callee)) return false;
    TSNode args = ts_node_child_by_field_id(n, syn_.f_arguments);
    if (ts_node_is_null(args) || syn_.Kind(args) != NodeKind::kArgumentList) return false;
    std::vector<TSNode> positional;
    for (TSNode a : NamedChildren(args))
      if (syn_.Kind(a) != NodeKind::kKeywordArgument && syn_.Kind(a) != NodeKind::kComment) positional.push_back(a);
    if (positional.empty()) return false;
    if (last == "zip") {
      for (TSNode a : positional)
        if (IsDataExpression(a, depth + 1)) return true;
      return false;
    }
    return IsDataExpression(positional[0], depth + 1);
  }

  const PySyntax& syn_;
  std::string_view src_;
  std::vector<WrappedLoop>& out_;
  std::vector<RejectedLoop>* rejected_;
  std::vector<uint32_t> wrapped_iters_;  // start bytes of the iter() calls wrapped
  bool reached_wrapped_iter_ = false;
};

bool IsCompound(NodeKind k) {
  switch (k) {
    case NodeKind::kFunctionDefinition:
    case NodeKind::kClassDefinition:
    case NodeKind::kDecoratedDefinition:
    case NodeKind::kIfStatement:
    case NodeKind::kForStatement:
    case NodeKind::kWhileStatement:
    case NodeKind::kTryStatement:
    case NodeKind::kWithStatement:
    case NodeKind::kComment: return true;
    default:
      // match statements and anything else unknown: treat as compound to stay safe.
      return k == NodeKind::kOther;
  }
}

std::string ImportPrefix(int depth) {
  std::string up = depth == 0 ? "." : "..";
  for (int i = 1; i < depth; ++i) up += "/..";
  return "import sys as _msft_sys, os as _msft_os; _msft_sys.path.insert(0, _msft_os.path.normpath("
         "_msft_os.path.join(_msft_os.path.dirname(_msft_os.path.abspath(__file__)), \"" +
         up + "\"))); from msft_dynamic_analysis import DETECTOR";
}

}  // namespace

std::vector<WrappedLoop> FindDataLoops(const PySyntax& syn, const ParsedSource& src, const ModuleSummary& summary,
                                       ProjectIndex& index, std::vector<RejectedLoop>* rejected) {
  std::vector<WrappedLoop> loops;
  LoopFinder finder(syn, src.source, loops, rejected);
  finder.FindIteratorsForNext(src.root());
  FileWalker(
      syn, src, summary, index, [](const std::string&) { return false; }, finder)
      .Run();
  std::sort(loops.begin(), loops.end(),
            [](const WrappedLoop& a, const WrappedLoop& b) { return a.start_byte < b.start_byte; });
  return loops;
}

namespace {

/// Line starts; the first line starts after a BOM, which stays the file's first bytes. Line ends
/// as CPython reads them: "\n", "\r\n" and a lone "\r".
std::vector<size_t> LineStarts(std::string_view text, size_t bom) {
  std::vector<size_t> line_start{bom};
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n')))
      line_start.push_back(i + 1);
  return line_start;
}

/// The rows of the module's top-level statements.
struct TopLevelRows {
  std::vector<char> occupied;     ///< covered by a top-level statement other than its first row
  std::vector<int> simple_start;  ///< 1: a simple statement starts at column 0
  uint32_t min_row = 0;           ///< first row after the `from __future__` imports
};

TopLevelRows ScanTopLevel(const PySyntax& syn, const ParsedSource& src, size_t lines, size_t bom) {
  TopLevelRows rows{std::vector<char>(lines, 0), std::vector<int>(lines, 0), 0};
  TSNode root = src.root();
  uint32_t count = ts_node_named_child_count(root);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode c = ts_node_named_child(root, i);
    TSPoint a = ts_node_start_point(c), b = ts_node_end_point(c);
    for (uint32_t r = a.row + 1; r <= b.row && r < lines; ++r) rows.occupied[r] = 1;
    NodeKind k = syn.Kind(c);
    if (k == NodeKind::kFutureImportStatement) {
      rows.min_row = b.row + 1;
      rows.occupied[a.row] = 1;
      continue;
    }
    if (a.column == (a.row == 0 ? bom : 0) && a.row < lines) {
      if (!IsCompound(k)) rows.simple_start[a.row] = 1;
      else if (k != NodeKind::kComment) rows.occupied[a.row] = 1;
    }
  }
  return rows;
}

/// The first row the DETECTOR import can go on, or -1: a row where a simple statement starts
/// (`*as_statement`: the import goes before it, as a statement of the same line), or a blank or
/// comment row (not the shebang, nor a PEP 263 coding line).
long ImportRow(std::string_view text, const std::vector<size_t>& line_start, const TopLevelRows& rows,
               bool* as_statement) {
  const size_t lines = line_start.size();
  for (uint32_t r = rows.min_row; r < lines; ++r) {
    if (rows.occupied[r]) continue;
    size_t b = line_start[r];
    size_t e = r + 1 < lines ? line_start[r + 1] - 1 : text.size();
    std::string_view line(text.data() + b, e - b);
    size_t first = line.find_first_not_of(" \t\r");
    if (rows.simple_start[r]) {
      *as_statement = true;
      return r;
    }
    bool blank = first == std::string_view::npos;
    bool comment = !blank && line[first] == '#';
    if (r == 0 && line.rfind("#!", 0) == 0) continue;  // keep the shebang working
    // A PEP 263 coding line must stay a comment of its own on line 1 or 2.
    if (r < 2 && comment && !DeclaredEncoding(line).empty()) continue;
    if (blank || comment) return r;
  }
  return -1;
}

/// No free line: the import goes at the end of the last line (functions run after import).
void AppendImportToLastLine(std::string& out, const std::string& prefix, std::string* warning) {
  if (warning) *warning = "no free line before the code for the DETECTOR import; appended to the last line";
  if (!out.empty() && (out.back() == '\n' || out.back() == '\r')) {
    size_t eol = out.size() - (out.size() >= 2 && out.compare(out.size() - 2, 2, "\r\n") == 0 ? 2 : 1);
    out.insert(eol, "; " + prefix);  // before the whole line end, "\r\n" included
  } else {
    out += "\n" + prefix;  // cannot happen without a trailing line; adds one line at the end
  }
}

/// Inserts the import at `row_byte` of the edited text: before a statement, on a blank line, or
/// before a comment.
void InsertImportAt(std::string& out, size_t row_byte, const std::string& prefix, bool as_statement) {
  size_t line_end = out.find_first_of("\r\n", row_byte);
  std::string_view line(out.data() + row_byte, (line_end == std::string::npos ? out.size() : line_end) - row_byte);
  size_t first = line.find_first_not_of(" \t\r");
  if (as_statement) {
    out.insert(row_byte, prefix + "; ");
  } else if (first == std::string_view::npos) {
    out.insert(row_byte, prefix);
  } else {
    out.insert(row_byte + first, prefix + "  ");  // before a comment
    out.erase(row_byte, first);                   // the comment line's leading spaces would be an indent
  }
}

}  // namespace

std::string InstrumentSource(const PySyntax& syn, const ParsedSource& src, const std::vector<WrappedLoop>& loops,
                             int depth, std::string* warning) {
  const std::string& text = src.source;
  const size_t bom = StartsWithBom(text) ? kUtf8Bom.size() : 0;
  const std::vector<size_t> line_start = LineStarts(text, bom);
  const TopLevelRows rows = ScanTopLevel(syn, src, line_start.size(), bom);
  std::string prefix = ImportPrefix(depth);
  bool as_statement = false;
  const long insert_row = ImportRow(text, line_start, rows, &as_statement);
  // Apply edits from the end so byte offsets stay valid.
  std::string out = text;
  for (auto it = loops.rbegin(); it != loops.rend(); ++it) {
    out.insert(it->end_byte, ")");
    out.insert(it->start_byte, "DETECTOR.start(");
  }
  if (insert_row < 0) {
    AppendImportToLastLine(out, prefix, warning);
    return out;
  }
  // Recompute the insertion byte in the edited text: edits only add bytes inside lines, so the
  // row's start moves by the bytes added before it.
  size_t row_byte = line_start[static_cast<size_t>(insert_row)];
  size_t shift = 0;
  for (const auto& l : loops)
    if (l.start_byte < row_byte) shift += std::string("DETECTOR.start()").size();
  row_byte += shift;
  for (const auto& l : loops) {
    if (l.module_level && l.line <= static_cast<uint32_t>(insert_row)) {
      if (warning)
        *warning = "a module-level loop at line " + std::to_string(l.line) + " runs before the DETECTOR import (line " +
                   std::to_string(insert_row + 1) + ")";
    }
  }
  InsertImportAt(out, row_byte, prefix, as_statement);
  return out;
}

Status PrepareDynamicShapeMode(ModeRun& run) {
  std::error_code ec;
  const fs::path python_root = FindPythonDir();
  const fs::path python_dir = python_root / "portkit" / "dynamic_shape";
  if (python_root.empty() || !fs::exists(python_dir / "hook.py", ec))
    return NotFound("detector sources not found" +
                    (python_root.empty() ? std::string() : " in " + python_dir.string()) +
                    " (set PORTKIT_PYTHON_DIR to the folder holding the portkit Python package: python/ of a"
                    " portkit checkout, or PREFIX/share/portkit/python of an installed portkit)");
  run.detector_dir = python_dir;
  return Status::Ok();
}

Status RunDynamicShapeMode(ModeRun& run) {
  Logger& log = run.ctx.logger;
  LoadedProject& project = *run.project;
  InstrumentedCopy& copy = run.report.copy;
  const fs::path& results = run.report.results_dir;
  const std::string& base = run.report.project;
  std::error_code ec;
  const SourceSet& sources = project.sources;
  Progress progress(log, sources.python.size() + 1);
  std::vector<std::string> entries;
  Status first_error;
  auto written = [&](const fs::path& dest, const Status& st) {
    if (!st.ok()) {
      log.Error(st.message());
      if (first_error.ok()) first_error = st;
      return;
    }
    copy.files.push_back(dest.lexically_relative(results).generic_string());
  };
  auto ensure_parent = [&](const fs::path& p) { fs::create_directories(p.parent_path(), ec); };
  // Room for the instrumented copy, measured before anything is written (docs/safety.md).
  {
    std::vector<fs::path> copied;
    for (const auto& f : project.py) copied.push_back(f.file->path);
    for (const auto* group : {&sources.cpp, &sources.others})
      for (const auto& f : *group) copied.push_back(f.path);
    CopySize size = MeasureCopy(copied);
    for (const auto& note : size.sparse) log.Warning(note);
    PORTKIT_RETURN_IF_ERROR(CheckFreeSpace(results, size.bytes, "the instrumented copy"));
  }
  PythonParser parser;                      // for the trees a large project did not keep
  std::vector<std::string> rejected_lines;  // logged when no loop is wrapped anywhere
  for (size_t i = 0; i < sources.python.size(); ++i) {
    PyFile& f = project.py[i];
    fs::path dest = results / f.file->rel;
    ensure_parent(dest);
    progress.Start("Start analysis " + f.file->display + ".");
    // Files without a data loop (and skipped ones) are copied as they are, byte for byte.
    const ParsedSource* tree = f.summary && !f.parsed.has_error() ? TreeOf(project, f, parser) : nullptr;
    std::vector<WrappedLoop> loops;
    std::vector<RejectedLoop> rejected;
    if (tree) loops = FindDataLoops(project.syntax, *tree, *f.summary, project.index, &rejected);
    for (const auto& r : rejected)
      rejected_lines.push_back(f.file->display + ":" + std::to_string(r.line) + ": `" + r.iterable + "`: " + r.reason);
    if (loops.empty()) {
      ReleaseTree(project, f);
      written(dest, CopyFileAtomic(f.file->path, dest));
      ++copy.files_copied;
      if (f.summary && f.parsed.source.find("__name__") != std::string::npos &&
          f.parsed.source.find("__main__") != std::string::npos)
        entries.push_back(f.file->rel);
      progress.Done("Analysis " + f.file->display + " complete.");
      continue;
    }
    std::string text;
    {
      int depth = static_cast<int>(std::count(f.file->rel.begin(), f.file->rel.end(), '/'));
      std::string warning;
      text = InstrumentSource(project.syntax, *tree, loops, depth, &warning);
      ReleaseTree(project, f);
      if (!f.codec.empty()) {
        // Read as Latin-1 or cp1252: written back in that encoding, its own bytes where not edited.
        auto encoded = EncodeSource(text, f.codec);
        if (!encoded.ok()) {
          log.Warning(f.file->display + ": the instrumented text cannot be written in " + f.codec + " (" +
                      encoded.status().message() + "); copied unchanged");
          written(dest, CopyFileAtomic(f.file->path, dest));
          ++copy.files_copied;
          progress.Done("Analysis " + f.file->display + " complete.");
          continue;
        }
        text = std::move(*encoded);
      }
      if (!warning.empty()) log.Warning(f.file->display + ": " + warning);
      for (const auto& l : loops) {
        log.Info((l.at_iterator ? "Wrapped the loader of the iterator made at " : "Wrapped the data loop at ") +
                 f.file->display + ":" + std::to_string(l.line) +
                 (l.at_iterator ? ": iter(DETECTOR.start(" : ": for ... in DETECTOR.start(") + l.iterable + ")" +
                 (l.at_iterator ? ")" : ""));
        copy.loops.push_back({f.file->display, l.line, l.iterable});
      }
      ++copy.python_instrumented;
    }
    entries.push_back(f.file->rel);
    written(dest, WriteFileAtomic(dest, text));
    ++copy.files_copied;
    progress.Done("Analysis " + f.file->display + " complete.");
  }
  for (const auto* group : {&sources.cpp, &sources.others}) {
    for (const auto& f : *group) {
      fs::path dest = results / f.rel;
      ensure_parent(dest);
      written(dest, CopyFileAtomic(f.path, dest));
      ++copy.files_copied;
    }
  }
  // Links are copied as links, never as what they point to (docs/safety.md).
  for (const auto& f : sources.links) {
    fs::path dest = results / f.rel;
    ensure_parent(dest);
    written(dest, CopySymlinkAtomic(f.path, dest));
    ++copy.files_copied;
  }
  // The detector package, importable from the copy's root.
  fs::path pkg = results / "msft_dynamic_analysis";
  fs::create_directories(pkg, ec);
  for (const char* name : {"__init__.py", "hook.py"})
    written(pkg / name, CopyFileAtomic(run.detector_dir / name, pkg / name));
  written(pkg / "_config.py",
          WriteFileAtomic(pkg / "_config.py", "# Written by portkit analyse -m dynamic_shape.\nDISPLAY_ROOT = " +
                                                  PythonStringLiteral(base) + "\n"));
  std::sort(copy.files.begin(), copy.files.end());
  if (!first_error.ok()) return first_error;
  if (copy.loops.empty()) {
    log.Warning(
        "No training data loop was recognised. Wrap it by hand in the copy: "
        "`from msft_dynamic_analysis import DETECTOR` and `for batch in DETECTOR.start(loader):`" +
        std::string(rejected_lines.empty() ? " (no candidate loop was seen)" : "; the candidate loops seen:"));
    for (const auto& r : rejected_lines) log.Warning("  not wrapped: " + r);
  }
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  if (!entries.empty()) copy.entry = entries.front();
  log.Info("Run the instrumented copy on the training machine: cd " + ShellQuote(results.string()) + " && python " +
           (entries.empty() ? std::string("<your entry script>.py") : ShellQuote(entries.front())) +
           " ...; the reports msft_dynamic_shape_analysis_report.csv (device ops) and "
           "msft_dynamic_shape_data_pipeline.csv (data-pipeline ops) are written to " +
           results.string() + " (MSFT_DYNAMIC_SHAPE_REPORT_DIR overrides).");
  return Status::Ok();
}

}  // namespace portkit::analyse
