#include "analyse/migrate.h"

#include <algorithm>
#include <filesystem>
#include <functional>

#include "analyse/api.h"
#include "analyse/project_loader.h"
#include "analyse/target.h"
#include "analyse/walker.h"
#include "core/atomic_file.h"
#include "core/unified_diff.h"

namespace portkit::analyse {
namespace fs = std::filesystem;

std::string ApplyEdits(std::string_view text, std::vector<Edit>& edits) {
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) {
    return std::tie(a.start_byte, b.end_byte) < std::tie(b.start_byte, a.end_byte);
  });
  std::vector<Edit> kept;
  for (auto& e : edits) {
    if (!kept.empty() && e.start_byte < kept.back().end_byte) continue;  // overlaps: outer wins
    kept.push_back(std::move(e));
  }
  edits = std::move(kept);
  std::string out;
  size_t at = 0;
  for (const auto& e : edits) {
    out.append(text.substr(at, e.start_byte - at));
    out.append(e.replacement);
    at = e.end_byte;
  }
  out.append(text.substr(at));
  return out;
}

namespace {

/// Collects the cuda → npu edits of one file from the walker's resolved events.
class MigrationCollector : public EventSink {
 public:
  MigrationCollector(const PySyntax& syn, std::string_view src, const Target& target, bool unsafe,
                     std::vector<Edit>& out)
      : syn_(syn), src_(src), target_(target), unsafe_(unsafe), out_(out) {}

  bool needs_torch_npu = false;

  void OnCall(const CallEvent& ev) override {
    TSNode fn = ts_node_child_by_field_id(ev.node, syn_.f_function);
    if (!ev.lookup.empty() && ev.callee.kind == ValueKind::kExternal) {
      if (Rename(fn, ev.lookup.front(), "FuncNameModify")) return;
    }
    if (syn_.Kind(fn) == NodeKind::kAttribute && ev.method == "cuda" &&
        ev.callee.kind != ValueKind::kUserFunction) {
      TSNode attr = ts_node_child_by_field_id(fn, syn_.f_attribute);
      Add(attr, "npu", "FuncNameModify", ".cuda() → .npu()");
      needs_torch_npu = true;
    }
    if (unsafe_ && !ev.lookup.empty()) {
      static constexpr std::string_view kOptimizers[] = {"AdamW", "Adam", "SGD", "Adadelta", "RMSprop"};
      for (auto o : kOptimizers) {
        if (ev.lookup.front() == "torch.optim." + std::string(o)) {
          Add(fn, "torch_npu.optim.NpuFused" + std::string(o), "AffinityReplace",
              ev.lookup.front() + " → torch_npu.optim.NpuFused" + std::string(o) + " (--unsafe)");
          needs_torch_npu = true;
        }
      }
    }
  }

  void OnAttribute(const AttributeEvent& ev) override { Rename(ev.node, ev.qname, "AttributeModify"); }

  void OnString(const StringEvent& ev) override {
    std::string replacement;
    const std::string& v = ev.value;
    if (v == "nccl") {
      replacement = "hccl";
    } else if (v.rfind("cuda", 0) == 0) {
      std::string_view rest(v.data() + 4, v.size() - 4);
      bool device = rest.empty();
      if (!device && rest.front() == ':' && rest.size() > 1) {
        device = true;
        for (char c : rest.substr(1)) device &= c >= '0' && c <= '9';
      }
      if (device) replacement = "npu" + std::string(rest);
    }
    if (replacement.empty()) return;
    // Replace the string's content, keeping its quotes and prefix.
    uint32_t count = ts_node_named_child_count(ev.node);
    for (uint32_t i = 0; i < count; ++i) {
      TSNode c = ts_node_named_child(ev.node, i);
      if (syn_.Kind(c) == NodeKind::kStringContent) {
        Add(c, replacement, "ReplaceString", "\"" + v + "\" → \"" + replacement + "\"");
        needs_torch_npu = true;
        return;
      }
    }
  }

  void OnSubscriptAssign(TSNode assignment, TSNode target, const Value& base, const Value& index) override {
    if (!unsafe_ || ts_node_is_null(assignment) || index.kind != ValueKind::kTensor ||
        base.kind != ValueKind::kTensor)
      return;
    TSNode obj = ts_node_child_by_field_id(target, syn_.f_value);
    TSNode right = ts_node_child_by_field_id(assignment, syn_.f_right);
    if (ts_node_named_child_count(target) != 2 || ts_node_is_null(right)) return;
    std::string x(NodeText(obj, src_)), cond(NodeText(ts_node_named_child(target, 1), src_));
    Add(assignment, x + " = torch_npu.npu_fast_condition_index_put(" + x + ", " + cond + ", " +
                        std::string(NodeText(right, src_)) + ")",
        "AffinityReplace", "masked assignment → torch_npu.npu_fast_condition_index_put (--unsafe)");
    needs_torch_npu = true;
  }

 private:
  bool Rename(TSNode node, const std::string& qname, const char* operation) {
    std::string renamed = target_.RewriteByPrefix(qname);
    if (renamed.empty() || renamed == qname) return false;
    // ProfilerActivity.CUDA and friends: the attribute itself is renamed too.
    if (renamed.size() > 5 && renamed.compare(renamed.size() - 5, 5, ".CUDA") == 0)
      renamed.replace(renamed.size() - 4, 4, "NPU");
    Add(node, renamed, operation, qname + " → " + renamed);
    needs_torch_npu = true;
    return true;
  }

  void Add(TSNode node, std::string replacement, const char* operation, std::string message) {
    out_.push_back({ts_node_start_byte(node), ts_node_end_byte(node), std::move(replacement),
                    StartLine(node), EndLine(node), operation, std::move(message)});
  }

  const PySyntax& syn_;
  std::string_view src_;
  const Target& target_;
  bool unsafe_;
  std::vector<Edit>& out_;
};

// `x.is_cuda` → `x.is_npu` wherever it appears (an attribute of any object).
void IsCudaEdits(const PySyntax& syn, TSNode root, std::string_view src, std::vector<Edit>& out) {
  ForEachNamedNode(root, [&](TSNode n) {
    if (syn.Kind(n) == NodeKind::kAttribute) {
      TSNode attr = ts_node_child_by_field_id(n, syn.f_attribute);
      if (NodeText(attr, src) == "is_cuda")
        out.push_back({ts_node_start_byte(attr), ts_node_end_byte(attr), "is_npu", StartLine(attr),
                       EndLine(attr), "AttributeModify", ".is_cuda → .is_npu"});
    }
    return true;
  });
}

// Where `import torch_npu` goes: after the first top-level `import torch...` statement, else
// after the docstring and __future__ imports. Returns the byte offset of the line to insert at.
bool FindImportLine(const PySyntax& syn, const ParsedSource& src, uint32_t* byte, uint32_t* line) {
  TSNode root = src.root();
  uint32_t count = ts_node_named_child_count(root);
  long after = -1;
  for (uint32_t i = 0; i < count; ++i) {
    TSNode c = ts_node_named_child(root, i);
    NodeKind k = syn.Kind(c);
    std::string_view text = NodeText(c, src.source);
    if (k == NodeKind::kImportStatement || k == NodeKind::kImportFromStatement) {
      if (text.find("torch_npu") != std::string_view::npos) return false;  // already imported
      if (after < 0 && (text.rfind("import torch", 0) == 0 || text.rfind("from torch", 0) == 0))
        after = static_cast<long>(ts_node_end_byte(c));
    }
  }
  if (after < 0) {
    for (uint32_t i = 0; i < count; ++i) {
      TSNode c = ts_node_named_child(root, i);
      NodeKind k = syn.Kind(c);
      bool docstring = i == 0 && k == NodeKind::kExpressionStatement &&
                       syn.Kind(ts_node_named_child(c, 0)) == NodeKind::kString;
      if (k == NodeKind::kFutureImportStatement || docstring || k == NodeKind::kComment) {
        after = static_cast<long>(ts_node_end_byte(c));
        continue;
      }
      break;
    }
  }
  size_t pos = after < 0 ? 0 : src.source.find('\n', static_cast<size_t>(after));
  pos = after < 0 ? 0 : (pos == std::string::npos ? src.source.size() : pos + 1);
  *byte = static_cast<uint32_t>(pos);
  *line = static_cast<uint32_t>(std::count(src.source.begin(), src.source.begin() + static_cast<long>(pos), '\n') + 1);
  return true;
}

}  // namespace

Expected<MigrateReport> RunMigrate(const MigrateOptions& opt, Context& ctx) {
  Logger& log = ctx.logger;
  std::error_code ec;
  fs::path input(opt.input);
  if (!fs::is_directory(input, ec)) {
    std::string what = "input " + opt.input.string() +
                       (fs::exists(input, ec) ? " is not a folder" : " does not exist") +
                       "; give the folder of the project to migrate (-i DIR)";
    return fs::exists(input, ec) ? InvalidArgument(what) : NotFound(what);
  }
  input = fs::weakly_canonical(fs::absolute(input), ec);
  auto target = Target::Load(ctx.data_dir, opt.target, "", nullptr);
  if (!target.ok()) return target.status();
  MigrateReport report;
  report.target = target->name();
  report.unsafe = opt.unsafe;
  report.project = input.filename().string();
  const std::string& base = report.project;
  fs::path results = fs::absolute(opt.output) / (base + "_msft");
  report.results_dir = results;
  fs::create_directories(results, ec);
  if (ec || !fs::is_directory(results, ec))
    return IoError("output folder " + results.string() + " cannot be created" + (ec ? ": " + ec.message() : ""));
  log.Info("Migration to " + opt.target + " start" + (opt.unsafe ? " (--unsafe: affinity replacements too)" : "") + ".");
  ThreadPool pool(ctx.jobs);
  LoadedProject project;
  LoadProject({input, base, {results}, {}, opt.max_file_bytes}, log, pool, project);
  struct FileResult {
    std::string text;
    std::vector<Edit> edits;
    bool reverted = false;
  };
  std::vector<FileResult> out(project.py.size());
  std::vector<std::unique_ptr<PythonParser>> parsers;
  for (int i = 0; i < pool.size(); ++i) parsers.push_back(std::make_unique<PythonParser>());
  Progress progress(log, project.py.size());
  pool.ParallelFor(project.py.size(), [&](int worker, size_t i) {
    PyFile& f = project.py[i];
    FileResult& r = out[i];
    if (!f.summary || !f.parsed.tree || f.parsed.has_error()) {
      r.text.clear();  // copied unchanged
      progress.Done("Skipped " + f.file->display + " (not migrated: see the warnings above).");
      return;
    }
    MigrationCollector collector(project.syntax, f.parsed.source, *target, opt.unsafe, r.edits);
    FileWalker(project.syntax, f.parsed, *f.summary, project.index,
               [&](const std::string& q) { return target->Known(q); }, collector).Run();
    IsCudaEdits(project.syntax, f.parsed.root(), f.parsed.source, r.edits);
    if (!r.edits.empty()) collector.needs_torch_npu = true;
    r.text = ApplyEdits(f.parsed.source, r.edits);
    uint32_t byte = 0, line = 0;
    if (collector.needs_torch_npu && FindImportLine(project.syntax, f.parsed, &byte, &line)) {
      // Insert the import into the edited text: offsets before `byte` shifted by earlier edits.
      long shift = 0;
      for (const auto& e : r.edits)
        if (e.end_byte <= byte) shift += static_cast<long>(e.replacement.size()) - static_cast<long>(e.end_byte - e.start_byte);
      r.text.insert(static_cast<size_t>(static_cast<long>(byte) + shift), "import torch_npu\n");
      r.edits.push_back({byte, byte, "import torch_npu\n", line, line, "InsertImport", "import torch_npu"});
    }
    // Every migrated file must parse; a rewrite that breaks it is undone.
    if (!r.edits.empty()) {
      ParsedSource check = parsers[worker]->Parse(r.text);
      if (check.has_error()) {
        r.reverted = true;
        r.text = f.parsed.source;
      }
    }
    progress.Done("Migrated " + f.file->display + " (" + std::to_string(r.edits.size()) + " changes).");
  });

  std::string patch;
  Status first_error;
  auto write = [&](const fs::path& dest, const std::function<Status()>& fn) {
    fs::create_directories(dest.parent_path(), ec);
    Status st = fn();
    if (!st.ok()) {
      log.Error(st.message());
      if (first_error.ok()) first_error = st;
      return;
    }
    report.files_written.push_back(dest.lexically_relative(results).generic_string());
    ++report.files_copied;
  };
  for (size_t i = 0; i < project.py.size(); ++i) {
    const SourceFile& sf = *project.py[i].file;
    FileResult& r = out[i];
    fs::path dest = results / sf.rel;
    if (r.reverted) {
      log.Error(sf.display + ": the migrated file would not parse; left unchanged");
      report.warnings.push_back({sf.display, 0, 0, "not_migrated", "the migrated file would not parse; left unchanged"});
    }
    if (r.text.empty() || r.edits.empty() || r.reverted) {
      write(dest, [&] { return CopyFileAtomic(sf.path, dest); });
      continue;
    }
    std::sort(r.edits.begin(), r.edits.end(), [](const Edit& a, const Edit& b) {
      return std::tie(a.start_line, a.start_byte) < std::tie(b.start_line, b.start_byte);
    });
    for (const auto& e : r.edits) report.changes.push_back({sf.display, e.start_line, e.end_line, e.operation, e.message});
    patch += UnifiedDiff(project.py[i].parsed.source, r.text, sf.rel);
    ++report.files_changed;
    write(dest, [&] { return WriteFileAtomic(dest, r.text); });
  }
  for (const auto* group : {&project.sources.cpp, &project.sources.others})
    for (const auto& f : *group) {
      fs::path dest = results / f.rel;
      write(dest, [&] { return CopyFileAtomic(f.path, dest); });
    }
  // Files the loader could not analyse were copied unchanged.
  report.warnings.insert(report.warnings.end(), project.problems.begin(), project.problems.end());
  Status st = WriteFileAtomic(results / "migration.patch", patch);
  if (!st.ok()) {
    log.Error(st.message());
    if (first_error.ok()) first_error = st;
  } else {
    report.files_written.push_back("migration.patch");
  }
  std::sort(report.files_written.begin(), report.files_written.end());
  if (!first_error.ok()) return first_error;
  log.Info(Progress::Percent(1, 1) + "Migration success: " + std::to_string(report.files_changed) +
           " files changed, " + std::to_string(report.changes.size()) + " changes.");
  log.Info("The migrated copy is " + results.string() + "; `patch -p1 < migration.patch` applies the same "
           "changes to the original.");
  return report;
}

}  // namespace portkit::analyse
