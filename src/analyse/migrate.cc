#include "analyse/migrate.h"

#include <algorithm>
#include <filesystem>
#include <functional>

#include "analyse/api.h"
#include "analyse/project_loader.h"
#include "analyse/target.h"
#include "analyse/walker.h"
#include "core/atomic_file.h"
#include "core/input_files.h"
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

/// Collects the edits that port one file from CUDA to the target (by its target.json) from the
/// walker's resolved events.
class MigrationCollector : public EventSink {
 public:
  MigrationCollector(const PySyntax& syn, std::string_view src, const Target& target, bool unsafe,
                     std::vector<Edit>& out)
      : syn_(syn), src_(src), target_(target), facts_(target.facts()), unsafe_(unsafe), out_(out) {}

  bool needs_import = false;  ///< the file needs the target's import line

  void OnCall(const CallEvent& ev) override {
    TSNode fn = ts_node_child_by_field_id(ev.node, syn_.f_function);
    if (!ev.lookup.empty() && ev.callee.kind == ValueKind::kExternal) {
      if (Rename(fn, ev.lookup.front(), "FuncNameModify")) return;
    }
    const std::string* method = ev.method.empty() ? nullptr : Find(facts_.renames.methods, std::string(ev.method));
    if (method && syn_.Kind(fn) == NodeKind::kAttribute && ev.callee.kind != ValueKind::kUserFunction) {
      TSNode attr = ts_node_child_by_field_id(fn, syn_.f_attribute);
      Add(attr, *method, "FuncNameModify", "." + std::string(ev.method) + "() → ." + *method + "()");
      needs_import = true;
    }
    if (unsafe_ && !ev.lookup.empty()) {
      if (const std::string* fused = Find(facts_.fused_optimizers, ev.lookup.front())) {
        Add(fn, *fused, "AffinityReplace", ev.lookup.front() + " → " + *fused + " (--unsafe)");
        needs_import = true;
      }
    }
  }

  void OnAttribute(const AttributeEvent& ev) override { Rename(ev.node, ev.qname, "AttributeModify"); }

  void OnString(const StringEvent& ev) override {
    std::string replacement;
    const std::string& v = ev.value;
    if (const std::string* backend = Find(facts_.renames.distributed_backends, v)) {
      replacement = *backend;
    } else if (const std::string* env = Find(facts_.renames.env_vars, v)) {
      replacement = *env;
    } else {
      for (const auto& type : target_.cuda().device_types) {
        if (v.compare(0, type.size(), type) != 0) continue;
        std::string_view rest(v.data() + type.size(), v.size() - type.size());
        bool device = rest.empty();
        if (!device && rest.front() == ':' && rest.size() > 1) {
          device = true;
          for (char c : rest.substr(1)) device &= c >= '0' && c <= '9';
        }
        if (device) replacement = facts_.device_type + std::string(rest);
        break;
      }
    }
    if (replacement.empty()) return;
    // Replace the string's content, keeping its quotes and prefix.
    uint32_t count = ts_node_named_child_count(ev.node);
    for (uint32_t i = 0; i < count; ++i) {
      TSNode c = ts_node_named_child(ev.node, i);
      if (syn_.Kind(c) == NodeKind::kStringContent) {
        Add(c, replacement, "ReplaceString", "\"" + v + "\" → \"" + replacement + "\"");
        needs_import = true;
        return;
      }
    }
  }

  void OnSubscriptAssign(TSNode assignment, TSNode target, const Value& base, const Value& index) override {
    const std::string* fused = facts_.FusedApi("mask_index_put");
    if (!unsafe_ || !fused || ts_node_is_null(assignment) || index.kind != ValueKind::kTensor ||
        base.kind != ValueKind::kTensor)
      return;
    TSNode obj = ts_node_child_by_field_id(target, syn_.f_value);
    TSNode right = ts_node_child_by_field_id(assignment, syn_.f_right);
    if (ts_node_named_child_count(target) != 2 || ts_node_is_null(right)) return;
    std::string x(NodeText(obj, src_)), cond(NodeText(ts_node_named_child(target, 1), src_));
    Add(assignment, x + " = " + *fused + "(" + x + ", " + cond + ", " + std::string(NodeText(right, src_)) + ")",
        "AffinityReplace", "masked assignment → " + *fused + " (--unsafe)");
    needs_import = true;
  }

 private:
  bool Rename(TSNode node, const std::string& qname, const char* operation) {
    std::string renamed = target_.RewriteByPrefix(qname);
    if (renamed.empty() || renamed == qname) return false;
    Add(node, renamed, operation, qname + " → " + renamed);
    needs_import = true;
    return true;
  }

  static const std::string* Find(const std::map<std::string, std::string>& renames, const std::string& key) {
    auto it = renames.find(key);
    return it == renames.end() ? nullptr : &it->second;
  }

  void Add(TSNode node, std::string replacement, const char* operation, std::string message) {
    out_.push_back({ts_node_start_byte(node), ts_node_end_byte(node), std::move(replacement),
                    StartLine(node), EndLine(node), operation, std::move(message)});
  }

  const PySyntax& syn_;
  std::string_view src_;
  const Target& target_;
  const target::TargetFacts& facts_;
  bool unsafe_;
  std::vector<Edit>& out_;
};

// The target's attribute renames (`x.is_cuda` → `x.is_npu`) wherever they appear (an attribute of
// any object).
void AttributeRenameEdits(const PySyntax& syn, TSNode root, std::string_view src,
                          const std::map<std::string, std::string>& renames, std::vector<Edit>& out) {
  if (renames.empty()) return;
  ForEachNamedNode(root, [&](TSNode n) {
    if (syn.Kind(n) == NodeKind::kAttribute) {
      TSNode attr = ts_node_child_by_field_id(n, syn.f_attribute);
      auto it = renames.find(std::string(NodeText(attr, src)));
      if (it != renames.end())
        out.push_back({ts_node_start_byte(attr), ts_node_end_byte(attr), it->second, StartLine(attr),
                       EndLine(attr), "AttributeModify", "." + it->first + " → ." + it->second});
    }
    return true;
  });
}

// Where the target's import line goes: after the first top-level `import torch...` statement,
// else after the docstring and __future__ imports. Returns the byte offset of the line to insert
// at; false when an import statement already names `module`.
bool FindImportLine(const PySyntax& syn, const ParsedSource& src, const std::string& module, uint32_t* byte,
                    uint32_t* line) {
  TSNode root = src.root();
  uint32_t count = ts_node_named_child_count(root);
  long after = -1;
  for (uint32_t i = 0; i < count; ++i) {
    TSNode c = ts_node_named_child(root, i);
    NodeKind k = syn.Kind(c);
    std::string_view text = NodeText(c, src.source);
    if (k == NodeKind::kImportStatement || k == NodeKind::kImportFromStatement) {
      if (text.find(module) != std::string_view::npos) return false;  // already imported
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
  if (!target->facts().migratable())
    return InvalidArgument(target::CheckTargetChoice(ctx.data_dir, opt.target, true));
  MigrateReport report;
  report.target = target->name();
  report.unsafe = opt.unsafe;
  report.project = input.filename().string();
  const std::string& base = report.project;
  fs::path results = fs::absolute(opt.output) / (base + "_msft");
  report.results_dir = results;
  // A folder this command did not write is never overwritten without --force (docs/safety.md).
  bool reused = fs::exists(results, ec);
  if (reused && !opt.force && MarkedOutputCommand(results) != "migrate" && !fs::is_empty(results, ec))
    return InvalidArgument("output folder " + results.string() +
                           " already exists and was not written by portkit migrate; remove it, choose another "
                           "-o, or give --force to write into it");
  const std::vector<std::string> earlier_files = reused ? MarkedOutputFiles(results) : std::vector<std::string>{};
  fs::create_directories(results, ec);
  if (ec || !fs::is_directory(results, ec))
    return IoError("output folder " + results.string() + " cannot be created" + (ec ? ": " + ec.message() : ""));
  log.Info("Migration to " + target->name() + " start" + (opt.unsafe ? " (--unsafe: affinity replacements too)" : "") + ".");
  ThreadPool pool(ctx.jobs);
  LoadedProject project;
  LoadProject({input, base, {results}, {}, opt.max_file_bytes, target->facts().DeviceMethods()}, log, pool, project);

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
    const target::TargetFacts& facts = target->facts();
    AttributeRenameEdits(project.syntax, f.parsed.root(), f.parsed.source, facts.renames.attributes, r.edits);
    if (!r.edits.empty()) collector.needs_import = true;
    r.text = ApplyEdits(f.parsed.source, r.edits);
    uint32_t byte = 0, line = 0;
    if (collector.needs_import && !facts.import_line.empty() &&
        FindImportLine(project.syntax, f.parsed, facts.python_module, &byte, &line)) {
      // Insert the import into the edited text: offsets before `byte` shifted by earlier edits.
      long shift = 0;
      for (const auto& e : r.edits)
        if (e.end_byte <= byte) shift += static_cast<long>(e.replacement.size()) - static_cast<long>(e.end_byte - e.start_byte);
      r.text.insert(static_cast<size_t>(static_cast<long>(byte) + shift), facts.import_line + "\n");
      r.edits.push_back({byte, byte, facts.import_line + "\n", line, line, "InsertImport", facts.import_line});
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
  // Links are copied as links, never as what they point to (docs/safety.md).
  for (const auto& f : project.sources.links) {
    fs::path dest = results / f.rel;
    write(dest, [&] { return CopySymlinkAtomic(f.path, dest); });
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
  // Files an earlier run wrote that this run did not (deleted from the project since) are removed,
  // so the copy mirrors the project; only names recorded in the marker are touched.
  for (const auto& old : earlier_files) {
    if (std::binary_search(report.files_written.begin(), report.files_written.end(), old)) continue;
    fs::path stale = results / old;
    if (fs::symlink_status(stale, ec).type() == fs::file_type::directory) continue;
    if (fs::remove(stale, ec)) log.Warning(old + ": removed from the migrated copy (no longer in the project)");
  }
  if (Status marked = MarkOutput(results, "migrate", report.files_written); !marked.ok() && first_error.ok())
    first_error = marked;
  if (!first_error.ok()) return first_error;
  log.Info(Progress::Percent(1, 1) + "Migration success: " + std::to_string(report.files_changed) +
           " files changed, " + std::to_string(report.changes.size()) + " changes.");
  log.Info("The migrated copy is " + results.string() + "; `patch -p1 < migration.patch` applies the same "
           "changes to the original.");
  if (!target->facts().transfer_import.empty())
    log.Info("To run CUDA code unchanged instead, `" + target->facts().transfer_import + "` after the torch "
             "imports maps most CUDA calls to " + target->name() + " at run time.");
  return report;
}

}  // namespace portkit::analyse
