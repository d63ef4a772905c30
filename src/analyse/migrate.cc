#include "analyse/migrate.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <optional>
#include <regex>
#include <set>
#include <unordered_map>

#include "analyse/api.h"
#include "analyse/project_loader.h"
#include "analyse/python_check.h"
#include "analyse/rules/affinity_apis/rules.h"
#include "analyse/target.h"
#include "analyse/walker.h"
#include "core/atomic_file.h"
#include "core/input_files.h"
#include "core/unified_diff.h"
#include "target/migrate_rules.h"

namespace portkit::analyse {
namespace fs = std::filesystem;

std::string ApplyEdits(std::string_view text, std::vector<Edit>& edits) {
  // By position; at one position an insertion (empty range) first, then the outer edit.
  std::stable_sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) {
    bool a_range = a.end_byte > a.start_byte, b_range = b.end_byte > b.start_byte;
    return std::tie(a.start_byte, a_range, b.end_byte) < std::tie(b.start_byte, b_range, a.end_byte);
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

std::string_view LineEnding(std::string_view text) {
  size_t e = text.find_first_of("\r\n");
  if (e == std::string_view::npos || text[e] == '\n') return "\n";
  return e + 1 < text.size() && text[e + 1] == '\n' ? "\r\n" : "\r";
}

uint32_t LineOfByte(std::string_view text, size_t pos) {
  pos = std::min(pos, text.size());
  uint32_t line = 1;
  for (size_t i = 0; i < pos; ++i)
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 >= text.size() || text[i + 1] != '\n'))) ++line;
  return line;
}

size_t AfterLineEnd(std::string_view text, size_t from) {
  size_t e = text.find_first_of("\r\n", from);
  if (e == std::string_view::npos) return e;
  return e + (text[e] == '\r' && e + 1 < text.size() && text[e + 1] == '\n' ? 2 : 1);
}

namespace {

/// The migrate rules of a run with their skip patterns compiled once.
struct CompiledRules {
  struct Arg {
    const target::ArgRewrite* rule;
    std::vector<std::regex> skip;
  };
  std::vector<Arg> args;              ///< only the rules applied in every run (`when: always`)
  std::vector<std::regex> kept_when;  ///< the `when` of each kept_arguments rule, in order
  const target::MigrateRules* rules = nullptr;

  explicit CompiledRules(const target::MigrateRules& r) : rules(&r) {
    for (const auto& k : r.kept) kept_when.emplace_back(k.when, std::regex::ECMAScript);
    for (const auto& a : r.args) {
      if (!a.always) continue;
      Arg c{&a, {}};
      for (const auto& s : a.skip) c.skip.emplace_back(s, std::regex::ECMAScript | std::regex::icase);
      args.push_back(std::move(c));
    }
  }
};

/// `replacement` in the letter case of `original` ("NCCL" → "HCCL"; else as the target spells it).
std::string MatchCase(std::string_view original, std::string replacement) {
  bool upper = false, lower = false;
  for (char c : original) {
    upper |= std::isupper(static_cast<unsigned char>(c)) != 0;
    lower |= std::islower(static_cast<unsigned char>(c)) != 0;
  }
  if (upper && !lower)
    for (char& c : replacement) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return replacement;
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

/// After a device type, what makes a string a device string: nothing, `:N`, `:` (then
/// concatenated), `:{}` / `:{0}` / `:{:d}` (format / f-string), `:%d` / `:%s`.
bool DeviceSuffix(std::string_view rest) {
  if (rest.empty()) return true;
  if (rest.front() != ':') return false;
  rest.remove_prefix(1);
  if (rest.empty()) return true;
  if (std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; })) return true;
  if (rest == "%d" || rest == "%s" || rest == "%i") return true;
  return rest.size() >= 2 && rest.front() == '{' && rest.back() == '}' &&
         rest.find_first_of("{}", 1) == rest.size() - 1;
}

/// An edit whose replacement embeds the (edited) text of a sub-range: `placeholder` in `templ`
/// stands for the text of [inner_start, inner_end) after the edits inside it.
struct TemplateEdit {
  size_t edit;  ///< index into the edit list
  uint32_t inner_start, inner_end;
  std::string templ, placeholder;
};

/// Collects the edits that port one file from CUDA to the target (by its target data) from the
/// walker's resolved events, and warnings for what it leaves alone on purpose.
class MigrationCollector : public EventSink {
 public:
  MigrationCollector(const PySyntax& syn, const ParsedSource& parsed, const Target& target, const CompiledRules& rules,
                     bool unsafe, std::vector<Edit>& out, std::vector<FileProblem>& warnings)
      : syn_(syn),
        src_(parsed.source),
        root_(parsed.root()),
        target_(target),
        facts_(target.facts()),
        rules_(rules),
        unsafe_(unsafe),
        out_(out),
        warnings_(warnings) {}

  bool needs_import = false;  ///< the file needs the target's import line

  void OnCall(const CallEvent& ev) override {
    TSNode fn = ts_node_child_by_field_id(ev.node, syn_.f_function);
    // A call of another runtime (TensorRT, ONNX Runtime, OpenCV CUDA, cupy): its arguments are its own.
    if (!ev.lookup.empty() && target_.OtherRuntime(ev.lookup.front())) {
      foreign_.emplace_back(ts_node_start_byte(ev.node), ts_node_end_byte(ev.node));
      return;
    }
    KeptArguments(ev);
    if (!ev.lookup.empty() && CudaLibraryCall(ev, fn)) return;
    bool qualified = !ev.lookup.empty() && ev.callee.kind == ValueKind::kExternal;
    bool typed_method = !ev.lookup.empty() && !ev.method.empty() && !ev.receiver_unknown;
    if ((qualified || typed_method) && Unsupported(ev.node, ev.lookup.front())) return;
    if (qualified) {
      if (Rename(fn, ev.lookup.front(), "FuncNameModify")) {
        ArgumentEdits(ev);
        return;
      }
    }
    const std::string* method = ev.method.empty() ? nullptr : Find(facts_.renames.methods, std::string(ev.method));
    if (method && syn_.Kind(fn) == NodeKind::kAttribute && ev.callee.kind != ValueKind::kUserFunction) {
      TSNode attr = ts_node_child_by_field_id(fn, syn_.f_attribute);
      Add(attr, *method, "FuncNameModify", "." + std::string(ev.method) + "() → ." + *method + "()");
    }
    ArgumentEdits(ev);
    if (!ev.lookup.empty()) {
      // A call through a name bound by assignment (`optimizer_cls = torch.optim.AdamW`, then
      // `optimizer_cls(...)`): the reference where it is assigned gets the row (or the swap).
      std::string_view head = LeadingName(fn);
      bool through_assignment = !head.empty() && !ImportBound(head);
      const std::string* fused = Find(facts_.fused_optimizers, ev.lookup.front());
      if (fused && !through_assignment) FusedOptimizerSwap(fn, ev.node, ev.lookup.front(), *fused, false);
    }
  }

  void OnAttribute(const AttributeEvent& ev) override {
    if (ev.qname.empty()) return;
    if (FusedOptimizerReference(ev)) return;
    if (Unsupported(ev.node, ev.qname)) return;
    Rename(ev.node, ev.qname, "AttributeModify");
  }

  /// Imported names used as values (`opts = {"sgd": SGD}` after `from torch.optim import SGD`).
  void OnReference(const AttributeEvent& ev) override {
    if (!ev.qname.empty() && ev.attr.empty() && !ev.store) FusedOptimizerReference(ev);
  }

  void OnString(const StringEvent& ev) override { StringEdit(ev); }
  void OnFormattedString(const StringEvent& ev) override { StringEdit(ev); }

  void OnSubscriptAssign(TSNode assignment, TSNode target, const Value& base, const Value& index) override {
    const std::string* fused = facts_.FusedApi("mask_index_put");
    if (!unsafe_ || !fused || !affinity::IsMaskIndexPut(syn_, src_, assignment, target, base, index)) return;
    TSNode obj = ts_node_child_by_field_id(target, syn_.f_value);
    TSNode right = ts_node_child_by_field_id(assignment, syn_.f_right);
    std::string x(NodeText(obj, src_)), cond(NodeText(ts_node_named_child(target, 1), src_));
    // The fused API returns a new tensor: rebinding x is the same program only when nothing else
    // (a caller, an attribute, another name, a closure) holds the object x names.
    if (syn_.Kind(obj) != NodeKind::kIdentifier || !affinity::RebindKeepsMeaning(syn_, src_, assignment, x)) {
      warnings_.push_back({{},
                           StartLine(assignment),
                           StartCol(assignment),
                           "affinity_not_applied",
                           *fused + " returns a new tensor and " + x +
                               " may be relied on as changed in place here (a parameter, an attribute, or a "
                               "tensor another name refers to); left as it is"});
      return;
    }
    Add(assignment, x + " = " + *fused + "(" + x + ", " + cond + ", " + std::string(NodeText(right, src_)) + ")",
        "AffinityReplace", "masked assignment → " + *fused + " (--unsafe)", "fused_api");
    NeedModuleOf(*fused);
  }

  /// Edits the migration is not sure of: listed for review in change_list.csv, not made.
  std::vector<Edit> reviews;

  /// A torch optimizer class with a fused form in the target data, referenced without being
  /// called (a table of optimizers, `optimizer_cls = torch.optim.AdamW`, `opt_class=...`): the call
  /// through the name is not seen, so the reference gets what a call gets — a Review row, the
  /// swap with --unsafe. Type tests (`isinstance(o, torch.optim.SGD)`) and class bases are left.
  bool FusedOptimizerReference(const AttributeEvent& ev) {
    const std::string* fused = Find(facts_.fused_optimizers, ev.qname);
    if (!fused || ev.type_test || ev.store) return false;
    TSNode parent = ts_node_parent(ev.node);
    if (!ts_node_is_null(parent) && syn_.Kind(parent) == NodeKind::kArgumentList &&
        syn_.Kind(ts_node_parent(parent)) == NodeKind::kClassDefinition)
      return true;
    FusedOptimizerSwap(ev.node, ev.node, ev.qname, *fused, true);
    return true;
  }

  /// A torch optimizer -> the target's fused one: made at `edit` with --unsafe, else a Review
  /// row at `row`. Ascend's ports often make this swap; it changes how the update is computed
  /// (one fused kernel over flattened parameters), so it is listed, not made. `referenced`: the
  /// class is named without being called.
  void FusedOptimizerSwap(TSNode edit, TSNode row, const std::string& qname, const std::string& fused,
                          bool referenced) {
    if (unsafe_) {
      Add(edit, fused, "AffinityReplace",
          qname + " → " + fused + (referenced ? " (--unsafe; referenced, not called)" : " (--unsafe)"), "fused_api");
      NeedModuleOf(fused);
      return;
    }
    Review(row,
           qname + " → " + fused + " not made: " +
               (referenced ? "referenced, not called here (a call through this name makes torch's optimizer); " : "") +
               "the target's fused optimizer; --unsafe makes it, check the accuracy");
  }

  /// A Review row over `n`: an edit the migration is not sure of, listed in change_list.csv.
  void Review(TSNode n, std::string message) {
    reviews.push_back({ts_node_start_byte(n), ts_node_end_byte(n), "", StartLine(n), EndLine(n), "Review",
                       std::move(message), "review"});
  }

  /// Drops the edits inside calls of other runtimes, and edits that change nothing
  /// (`x.to(other_tensor)` rewritten to itself).
  void DropForeignAndUnchanged() {
    std::vector<Edit> kept;
    std::vector<bool> held(kept_args_.size());
    for (auto& e : out_) {
      bool foreign = std::any_of(foreign_.begin(), foreign_.end(),
                                 [&](const auto& r) { return e.start_byte >= r.first && e.end_byte <= r.second; });
      bool unchanged =
          e.end_byte > e.start_byte && src_.substr(e.start_byte, e.end_byte - e.start_byte) == e.replacement;
      bool inside_kept = false;
      for (size_t i = 0; i < kept_args_.size(); ++i)
        if (e.start_byte >= kept_args_[i].start_byte && e.end_byte <= kept_args_[i].end_byte)
          held[i] = inside_kept = true;
      if (!foreign && !unchanged && !inside_kept) kept.push_back(std::move(e));
    }
    out_ = std::move(kept);
    // An argument the target data keeps is listed for review only where an edit was held back.
    for (size_t i = 0; i < kept_args_.size(); ++i)
      if (held[i]) reviews.push_back(std::move(kept_args_[i]));
    kept_args_.clear();
  }

  /// Imports of CUDA-only library classes (`from apex.normalization import FusedLayerNorm`)
  /// become imports of the target's fused API or the plain torch equivalent under the same local
  /// name (`from torch.nn import LayerNorm as FusedLayerNorm`), unless a call of one needs review.
  void CudaLibraryImports(TSNode root) {
    if (target_.cuda_libraries().empty()) return;
    ForEachNamedNode(root, [&](TSNode n) {
      NodeKind k = syn_.Kind(n);
      if (k != NodeKind::kImportFromStatement) return k != NodeKind::kImportStatement;
      TSNode module = ts_node_child_by_field_id(n, syn_.f_module_name);
      if (ts_node_is_null(module)) return false;
      std::string from(NodeText(module, src_));
      std::string replacement, message;
      uint32_t count = ts_node_named_child_count(n);
      bool all = true, any = false, unsure = false, kept = false;
      for (uint32_t i = 0; i < count; ++i) {
        TSNode c = ts_node_named_child(n, i);
        if (ts_node_eq(c, module) || syn_.Kind(c) == NodeKind::kComment) continue;
        TSNode name = syn_.Kind(c) == NodeKind::kAliasedImport ? ts_node_child_by_field_id(c, syn_.f_name) : c;
        TSNode alias = syn_.Kind(c) == NodeKind::kAliasedImport ? ts_node_child_by_field_id(c, syn_.f_alias) : c;
        std::string qname = from + "." + std::string(NodeText(name, src_));
        const CudaLibraryClass* lib = FindLibrary(qname);
        if (!lib) {
          all = false;
          continue;
        }
        any = true;
        if (!lib->kept.empty()) {
          kept = unsure = true;
          message +=
              (message.empty() ? "" : ", ") + qname + " kept: " + lib->kept + "; torch's equivalent is " + lib->plain;
          continue;
        }
        std::string use = LibraryReplacement(*lib);
        unsure |= unsure_.count(qname) > 0 || use.empty();
        if (use.empty()) {
          message += (message.empty() ? "" : ", ") + qname + " → no plain torch equivalent";
          continue;
        }
        size_t dot = use.rfind('.');
        replacement += (replacement.empty() ? "" : "; ") + std::string("from ") + use.substr(0, dot) + " import " +
                       use.substr(dot + 1) + " as " + std::string(NodeText(alias, src_));
        message += (message.empty() ? "" : ", ") + qname + " → " + use;
      }
      if (!any) return false;
      if (!all || unsure) {
        Review(n, std::string(NodeText(n, src_)) + ": kept; " +
                      (kept     ? "what it imports stays the library's"
                       : unsure ? "a call needs review (see its row)"
                                : "it also imports names without a known counterpart") +
                      ", port it by hand (" + message + ")");
        return false;
      }
      out_.push_back({ts_node_start_byte(n), ts_node_end_byte(n), replacement, StartLine(n), EndLine(n),
                      "ModuleReplace", message, "cuda_library"});
      return false;
    });
  }

  /// Imports of compiled CUDA extensions (`import amp_C`, `from apex.multi_tensor_apply import
  /// multi_tensor_applier`): one Review row each; the code using them is ported by hand.
  void CudaExtensionImports(TSNode root) {
    const auto& modules = target_.cuda().extension_modules;
    if (modules.empty()) return;
    auto listed = [&](std::string_view name) {
      return std::any_of(modules.begin(), modules.end(), [&](const std::string& m) {
        return name == m || (name.size() > m.size() && name.substr(0, m.size()) == m && name[m.size()] == '.');
      });
    };
    ForEachNamedNode(root, [&](TSNode n) {
      NodeKind k = syn_.Kind(n);
      if (k != NodeKind::kImportStatement && k != NodeKind::kImportFromStatement) return true;
      std::vector<std::string> found;
      if (k == NodeKind::kImportFromStatement) {
        TSNode module = ts_node_child_by_field_id(n, syn_.f_module_name);
        if (!ts_node_is_null(module) && syn_.Kind(module) == NodeKind::kDottedName && listed(NodeText(module, src_)))
          found.emplace_back(NodeText(module, src_));
      } else {
        for (TSNode c : NamedChildren(n)) {
          TSNode name = syn_.Kind(c) == NodeKind::kAliasedImport ? ts_node_child_by_field_id(c, syn_.f_name) : c;
          if (!ts_node_is_null(name) && listed(NodeText(name, src_))) found.emplace_back(NodeText(name, src_));
        }
      }
      if (found.empty()) return false;
      std::string names;
      for (const auto& f : found) names += (names.empty() ? "" : ", ") + f;
      Review(n, names + ": a compiled CUDA extension (or a module built on one) with no " + target_.name() +
                    " build; port the code that uses it by hand");
      return false;
    });
  }

  /// The new imports of a `from <CUDA device module>... import ...` statement (new module,
  /// imported names), grouped by module; false when the statement is left as it is (not such an
  /// import, a name the table lacks, an unsupported name, or a class renamed on the way).
  bool CudaImportGroups(TSNode n, std::vector<std::pair<std::string, std::string>>& groups, std::string& message) {
    const std::string& cuda = target_.cuda().device_module;
    TSNode module = ts_node_child_by_field_id(n, syn_.f_module_name);
    if (cuda.empty() || ts_node_is_null(module) || syn_.Kind(module) != NodeKind::kDottedName) return false;
    std::string from(NodeText(module, src_));
    if (from != cuda && from.rfind(cuda + ".", 0) != 0) return false;
    uint32_t count = ts_node_named_child_count(n);
    for (uint32_t i = 0; i < count; ++i) {
      TSNode c = ts_node_named_child(n, i);
      if (ts_node_eq(c, module) || syn_.Kind(c) == NodeKind::kComment) continue;
      TSNode name = syn_.Kind(c) == NodeKind::kAliasedImport ? ts_node_child_by_field_id(c, syn_.f_name) : c;
      std::string qname = from + "." + std::string(NodeText(name, src_));
      std::string renamed = target_.RewriteByPrefix(qname);
      if (renamed.empty() || target_.Unsupported(qname)) return false;  // left as is (warned elsewhere)
      size_t dot = renamed.rfind('.');
      std::string new_module = renamed.substr(0, dot), imported = std::string(NodeText(c, src_));
      if (renamed.substr(dot + 1) != NodeText(name, src_)) return false;  // a renamed class: by hand
      auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == new_module; });
      if (it == groups.end()) groups.emplace_back(new_module, imported);
      else it->second += ", " + imported;
      message += (message.empty() ? "" : ", ") + qname + " → " + renamed;
    }
    return !groups.empty();
  }

  /// `from torch.cuda.amp import GradScaler, autocast` → `from torch_npu.npu.amp import ...`:
  /// imports from CUDA's device module follow the target's names (RewriteByPrefix); names that
  /// land in different modules get one import each, on the same line.
  void CudaModuleImports(TSNode root) {
    const std::string& cuda = target_.cuda().device_module;
    if (cuda.empty()) return;
    ForEachNamedNode(root, [&](TSNode n) {
      NodeKind k = syn_.Kind(n);
      if (k != NodeKind::kImportFromStatement) return k != NodeKind::kImportStatement;
      TSNode module = ts_node_child_by_field_id(n, syn_.f_module_name);
      std::vector<std::pair<std::string, std::string>> groups;  // new module, imported names
      std::string message;
      if (!CudaImportGroups(n, groups, message)) return false;
      std::string from(NodeText(module, src_));
      std::string cls = from.rfind(cuda + ".amp", 0) == 0 ? "amp" : "device_api";
      if (groups.size() == 1) {
        Add(module, groups.front().first, "ModuleNameModify", message, cls);
        return false;
      }
      std::string text;
      for (const auto& [m, names] : groups) text += (text.empty() ? "" : "; ") + ("from " + m + " import " + names);
      Add(n, text, "ModuleNameModify", message, cls);
      return false;
    });
  }

  /// One warning for the file when it keeps calls of CUDA's device module (torch.cuda.X) because
  /// the target names no device_module to move them to: the migrated code would run on the CPU.
  void AddCudaLeftWarning() {
    if (cuda_left_.empty()) return;
    auto [line, col] = *cuda_left_.begin();
    std::string n = std::to_string(cuda_left_.size());
    warnings_.push_back({{},
                         line,
                         col,
                         "cuda_left",
                         n + " use" + (cuda_left_.size() == 1 ? "" : "s") + " of " + target_.cuda().device_module +
                             " left in place (first here): target " + target_.name() + " names no device_module in " +
                             facts_.file().string() + ", so the migrated code keeps calling CUDA"});
  }

  /// Submodules of the target module that the applied replacements name
  /// ("torch_npu.contrib.function"): imported explicitly, since importing the target module may not
  /// load them.
  std::set<std::string> extra_imports;

  /// Fills the replacements of template edits from the edits inside their placeholder range
  /// (`x.to(torch.cuda.current_device())`: the argument is rewritten with its renamed text) and
  /// drops those inner edits.
  void ComposeTemplates() {
    std::vector<bool> drop(out_.size());
    for (const auto& t : templates_) {
      Edit& outer = out_[t.edit];
      std::vector<Edit> inner;
      for (size_t i = 0; i < out_.size(); ++i) {
        if (i == t.edit || drop[i]) continue;
        const Edit& e = out_[i];
        if (e.start_byte >= outer.start_byte && e.end_byte <= outer.end_byte && e.end_byte > e.start_byte) {
          if (e.start_byte >= t.inner_start && e.end_byte <= t.inner_end) {
            inner.push_back(e);
            inner.back().start_byte -= t.inner_start;
            inner.back().end_byte -= t.inner_start;
          }
          drop[i] = true;
        }
      }
      std::string text = ApplyEdits(src_.substr(t.inner_start, t.inner_end - t.inner_start), inner);
      std::string result;
      std::string_view templ = t.templ;
      for (size_t at; (at = templ.find(t.placeholder)) != std::string_view::npos;) {
        result.append(templ.substr(0, at)).append(text);
        templ.remove_prefix(at + t.placeholder.size());
      }
      result.append(templ);
      outer.message +=
          ": " + std::string(src_.substr(outer.start_byte, outer.end_byte - outer.start_byte)) + " → " + result;
      outer.replacement = std::move(result);
    }
    std::vector<Edit> kept;
    for (size_t i = 0; i < out_.size(); ++i)
      if (!drop[i]) kept.push_back(std::move(out_[i]));
    out_ = std::move(kept);
    templates_.clear();
  }

 private:
  /// A warning instead of a rewrite for an API the target lists as unsupported.
  bool Unsupported(TSNode node, const std::string& qname) {
    const std::string* note = target_.Unsupported(qname);
    if (!note) return false;
    uint32_t line = StartLine(node);
    if (warned_.insert({line, qname}).second) {
      std::string version = target_.list_version().empty() ? "" : " (torch " + target_.list_version() + ")";
      std::string renamed = target_.RewriteByPrefix(qname);
      std::string action = renamed.empty() || renamed == qname ? "port it by hand" : "not rewritten to " + renamed;
      warnings_.push_back({{},
                           line,
                           ts_node_start_point(node).column + 1,
                           "unsupported_api",
                           qname + " is not supported on " + target_.name() + version + "; " + action +
                               (note->empty() ? "" : " (" + *note + ")")});
    }
    return true;
  }

  /// Renames a reference to `qname` by the target's rewrite table. Where the new name keeps the
  /// old one's leading components and the code spells the changed tail after a name of its own
  /// (`dist.is_nccl_available` for torch.distributed.is_nccl_available), only the tail is
  /// replaced, keeping the user's alias; else the whole reference becomes the new qualified name.
  bool Rename(TSNode node, const std::string& qname, const char* operation) {
    // A reference whose leading name the file binds otherwise than by an import
    // (`amp_autocast = torch.cuda.amp.autocast`, then `amp_autocast()`; `self.amp.autocast()`
    // after `self.amp = torch.cuda.amp`) is left when the assigned value is itself rewritten
    // where it is written: the name may hold something else at this point (`amp_autocast =
    // suppress`), and the value it holds from CUDA is the target's already.
    if (ThroughRewrittenAssignment(node, qname)) return false;
    // A name a rewritten import binds (`from torch.cuda import amp` → `from torch.npu import amp`,
    // then `amp.GradScaler()`): the import carries the change, the reference stays.
    if (std::string_view head = LeadingName(node); ImportBound(head) && cuda_import_bound_.count(head)) return false;
    std::string renamed = target_.RewriteByPrefix(qname);
    if (renamed.empty()) NoteCudaLeft(node, qname);
    if (renamed.empty() || renamed == qname) return false;
    // The target's spelling in code (torch.npu.X for torch_npu.npu.X) where the reference keeps
    // the user's own name for the shared prefix (`torch.` or an alias of it); else the module's.
    std::string spelled = facts_.SpellInCode(renamed);
    std::string replacement = KeepUserPrefix(node, qname, spelled);
    if (!replacement.empty()) {
      renamed = spelled;
    } else {
      replacement = KeepUserPrefix(node, qname, renamed);
      if (replacement.empty()) replacement = renamed;
    }
    const std::string& cuda = target_.cuda().device_module;
    bool amp = !cuda.empty() && qname.rfind(cuda + ".amp.", 0) == 0;
    Add(node, replacement, operation, qname + " → " + renamed, amp ? "amp" : "device_api");
    return true;
  }

  /// `renamed` written with the user's text for the leading components it shares with `qname`
  /// (`t.cuda.X` after `import torch as t` → `t.npu.X`); empty when they share none or the
  /// reference does not end with the rest of `qname`.
  std::string KeepUserPrefix(TSNode node, const std::string& qname, const std::string& renamed) const {
    size_t common = 0;  // bytes of the shared leading components, with their dot
    for (size_t i = 0; i <= qname.size() && i <= renamed.size(); ++i) {
      bool end_q = i == qname.size() || qname[i] == '.', end_r = i == renamed.size() || renamed[i] == '.';
      if (end_q && end_r) common = i + 1;
      if (i == qname.size() || i == renamed.size() || qname[i] != renamed[i]) break;
    }
    if (common == 0 || common > qname.size()) return {};
    std::string_view text = NodeText(node, src_);
    std::string tail = "." + qname.substr(common);
    if (text.size() <= tail.size() || text.substr(text.size() - tail.size()) != tail) return {};
    return std::string(text.substr(0, text.size() - tail.size())) + "." + renamed.substr(common);
  }

  bool Matches(const CallEvent& ev, const std::string& api, bool method) const {
    if (method) return ev.method == api;
    if (ev.callee.kind != ValueKind::kExternal && ev.callee.kind != ValueKind::kMethod) return false;
    return std::find(ev.lookup.begin(), ev.lookup.end(), api) != ev.lookup.end();
  }

  /// The argument node of `arg` (the keyword_argument for a keyword, else the value).
  TSNode ArgumentNode(const Argument& arg) const {
    if (arg.keyword.empty()) return arg.value;
    TSNode parent = ts_node_parent(arg.value);
    return syn_.Kind(parent) == NodeKind::kKeywordArgument ? parent : arg.value;
  }

  /// Deletes an argument with its comma.
  void DeleteArgument(TSNode arg, std::string message) {
    TSNode next = ts_node_next_named_sibling(arg);
    while (!ts_node_is_null(next) && syn_.Kind(next) == NodeKind::kComment) next = ts_node_next_named_sibling(next);
    TSNode prev = ts_node_prev_named_sibling(arg);
    while (!ts_node_is_null(prev) && syn_.Kind(prev) == NodeKind::kComment) prev = ts_node_prev_named_sibling(prev);
    uint32_t start = ts_node_start_byte(arg), end = ts_node_end_byte(arg);
    if (!ts_node_is_null(next)) end = ts_node_start_byte(next);
    else if (!ts_node_is_null(prev)) start = ts_node_end_byte(prev);
    out_.push_back({start, end, "", StartLine(arg), EndLine(arg), "ArgsModify", std::move(message), "arguments"});
  }

  /// True when `arg` is known not to be a device number, so a device-number rewrite does not
  /// apply: the analyser typed it (a tensor, an instance, a class), or it is named as a device
  /// object (`device`, `args.device`, `self.dev`, `x_device`: a torch.device or a string).
  bool NotADeviceNumber(const Argument& arg) const {
    switch (arg.type.kind) {
      case ValueKind::kUnknown:
      case ValueKind::kOther: break;
      default: return true;
    }
    TSNode name = arg.value;
    if (syn_.Kind(name) == NodeKind::kAttribute) name = ts_node_child_by_field_id(name, syn_.f_attribute);
    if (syn_.Kind(name) != NodeKind::kIdentifier) return false;
    std::string_view id = NodeText(name, src_);
    auto ends = [&](std::string_view s) { return id.size() >= s.size() && id.substr(id.size() - s.size()) == s; };
    return id == "dev" || id == "device" || ends("_device") || ends("_dev");
  }

  /// False for a plain name whose `_`-separated tokens include none of the CUDA data's
  /// device_number_tokens (`.to(boxes)`: another tensor, where the device-number rewrite would
  /// change nothing); calls and other expressions may be device numbers.
  bool MayBeDeviceNumber(const Argument& arg) const {
    const auto& tokens = target_.cuda().device_number_tokens;
    TSNode name = arg.value;
    if (syn_.Kind(name) == NodeKind::kAttribute) name = ts_node_child_by_field_id(name, syn_.f_attribute);
    if (tokens.empty() || syn_.Kind(name) != NodeKind::kIdentifier) return true;
    std::string_view id = NodeText(name, src_);
    for (size_t b = 0; b <= id.size();) {
      size_t e = std::min(id.find('_', b), id.size());
      std::string token(id.substr(b, e - b));
      for (char& c : token) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (std::find(tokens.begin(), tokens.end(), token) != tokens.end()) return true;
      b = e + 1;
    }
    return false;
  }

  void ArgumentEdits(const CallEvent& ev) {
    const std::string where =
        ev.method.empty() && !ev.lookup.empty() ? ev.lookup.front() + "()" : "." + std::string(ev.method) + "()";
    for (const auto& c : rules_.args) {
      const target::ArgRewrite& r = *c.rule;
      if (!Matches(ev, r.api, r.method)) continue;
      const Argument* arg = r.position >= 0 ? ev.Positional(static_cast<size_t>(r.position)) : ev.Keyword(r.keyword);
      if (!arg || arg->splat) continue;
      std::string text(NodeText(arg->value, src_));
      bool skip = false;
      for (const auto& re : c.skip) skip |= std::regex_search(text, re);
      if (skip) continue;
      std::string which = r.position >= 0 ? "argument " + std::to_string(r.position + 1) : r.keyword + "=";
      if (r.replacement.empty()) {
        DeleteArgument(ArgumentNode(*arg), "removed " + which + " of " + where);
        continue;
      }
      if (NotADeviceNumber(*arg) || text.find('\n') != std::string::npos) continue;
      if (syn_.Kind(arg->value) == NodeKind::kInteger && !facts_.device_type.empty() &&
          std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        std::string device = "\"" + facts_.device_type + ":" + text + "\"";
        Add(arg->value, device, "ArgsModify", which + " of " + where + ": " + text + " → " + device, "arguments");
        continue;
      }
      if (!MayBeDeviceNumber(*arg)) continue;
      uint32_t s = ts_node_start_byte(arg->value), e = ts_node_end_byte(arg->value);
      templates_.push_back({out_.size(), s, e, r.replacement, "$arg"});
      Add(arg->value, "", "ArgsModify", which + " of " + where, "arguments");
    }
    for (const auto& r : rules_.rules->keywords) {
      if (!Matches(ev, r.api, false)) continue;
      const Argument* arg = ev.Keyword(r.keyword);
      if (!arg) continue;
      TSNode node = ArgumentNode(*arg);
      std::string_view value = NodeText(arg->value, src_);
      if (value == "True") {
        Add(node, r.if_true, "ArgsModify", std::string(NodeText(node, src_)) + " → " + r.if_true, "arguments");
      } else if (value == "False") {
        DeleteArgument(node, "removed " + std::string(NodeText(node, src_)) + " of " + where);
      } else {
        templates_.push_back(
            {out_.size(), ts_node_start_byte(arg->value), ts_node_end_byte(arg->value), r.expression, "$value"});
        Add(node, "", "ArgsModify", r.keyword + "= of " + where, "arguments");
      }
    }
    for (const auto& r : rules_.rules->additions) {
      if (!Matches(ev, r.api, false) || ev.has_splat() || ev.Keyword(r.keyword) || ev.args.empty()) continue;
      if (r.position >= 0 && ev.Positional(static_cast<size_t>(r.position))) continue;  // given positionally
      if (!r.when_keyword.empty() || r.when_position >= 0) {
        const Argument* when = r.when_keyword.empty() ? nullptr : ev.Keyword(r.when_keyword);
        if (!when && r.when_position >= 0) when = ev.Positional(static_cast<size_t>(r.when_position));
        if (!when || NodeText(when->value, src_) == "False") continue;
      }
      TSNode last = ArgumentNode(ev.args.back());
      uint32_t at = ts_node_end_byte(last);
      std::string added = r.keyword + "=" + r.value;
      out_.push_back({at, at, ", " + added, EndLine(last), EndLine(last), "ArgsModify",
                      "added " + added + " to " + where, "arguments"});
    }
  }

  /// Arguments the target data keeps as written (migrate_rules.json kept_arguments): the edits
  /// inside them are held back and each becomes one Review row (DropForeignAndUnchanged).
  void KeptArguments(const CallEvent& ev) {
    const auto& kept = rules_.rules->kept;
    for (size_t i = 0; i < kept.size(); ++i) {
      const target::KeptArgument& k = kept[i];
      if (!Matches(ev, k.api, false)) continue;
      const Argument* arg = k.keyword.empty() ? nullptr : ev.Keyword(k.keyword);
      if (!arg && k.position >= 0) arg = ev.Positional(static_cast<size_t>(k.position));
      if (!arg || arg->splat) continue;
      std::string text(NodeText(arg->value, src_));
      if (!std::regex_search(text, rules_.kept_when[i])) continue;
      TSNode node = ArgumentNode(*arg);
      kept_args_.push_back({ts_node_start_byte(node), ts_node_end_byte(node), "", StartLine(node), EndLine(node),
                            "Review", std::string(NodeText(node, src_)) + " of " + k.api + ": kept; " + k.why,
                            "review"});
    }
  }

  void StringEdit(const StringEvent& ev) {
    const std::string& v = ev.value;
    std::string replacement;
    const char* edit_class = "device_string";
    size_t prefix = v.size();  // bytes of the content replaced (from its start)
    if (!ev.formatted) {
      for (const auto& [cuda, backend] : facts_.renames.distributed_backends)
        if (IEquals(v, cuda)) replacement = MatchCase(v, backend), edit_class = "distributed_backend";
      if (const std::string* env = Find(facts_.renames.env_vars, v)) replacement = *env, edit_class = "env_var";
    }
    if (replacement.empty() && !facts_.device_type.empty()) {
      for (const auto& type : target_.cuda().device_types) {
        if (v.size() < type.size() || !IEquals(std::string_view(v).substr(0, type.size()), type)) continue;
        if (!DeviceSuffix(std::string_view(v).substr(type.size()))) continue;
        replacement = MatchCase(std::string_view(v).substr(0, type.size()), facts_.device_type);
        prefix = type.size();
        break;
      }
    }
    if (replacement.empty()) return;
    // Replace the start of the string's first content, keeping its quotes, prefix and
    // interpolations.
    uint32_t count = ts_node_named_child_count(ev.node);
    for (uint32_t i = 0; i < count; ++i) {
      TSNode c = ts_node_named_child(ev.node, i);
      NodeKind k = syn_.Kind(c);
      if (k == NodeKind::kStringContent) {
        std::string_view content = NodeText(c, src_);
        if (content.size() < prefix || !IEquals(content.substr(0, prefix), std::string_view(v).substr(0, prefix)))
          return;
        uint32_t start = ts_node_start_byte(c);
        std::string old(content.substr(0, prefix));
        out_.push_back({start, start + static_cast<uint32_t>(prefix), replacement, StartLine(c), StartLine(c),
                        "ReplaceString", "\"" + v + "\" → \"" + replacement + v.substr(prefix) + "\"", edit_class});
        return;
      }
      if (std::string_view(ts_node_type(c)) != "string_start") return;  // an interpolation first
    }
  }

  static const std::string* Find(const std::map<std::string, std::string>& renames, const std::string& key) {
    auto it = renames.find(key);
    return it == renames.end() ? nullptr : &it->second;
  }

  void Add(TSNode node, std::string replacement, const char* operation, std::string message,
           std::string edit_class = "device_api") {
    out_.push_back({ts_node_start_byte(node), ts_node_end_byte(node), std::move(replacement), StartLine(node),
                    EndLine(node), operation, std::move(message), std::move(edit_class)});
  }

  const PySyntax& syn_;
  std::string_view src_;
  TSNode root_;
  const Target& target_;
  const target::TargetFacts& facts_;
  const CompiledRules& rules_;
  bool unsafe_;

  void NeedModuleOf(const std::string& qualified) {
    size_t dot = qualified.rfind('.');
    if (dot == std::string::npos) return;
    std::string module = qualified.substr(0, dot);
    if (module != facts_.python_module && module.rfind(facts_.python_module + ".", 0) == 0)
      extra_imports.insert(module);
  }
  std::vector<Edit>& out_;
  std::vector<FileProblem>& warnings_;
  std::vector<TemplateEdit> templates_;
  std::set<std::pair<uint32_t, std::string>> warned_;
  std::set<std::pair<uint32_t, uint32_t>> cuda_left_;   ///< line, column of torch.cuda uses left
  std::vector<std::pair<uint32_t, uint32_t>> foreign_;  ///< byte ranges of other runtimes' calls
  std::vector<Edit> kept_args_;                         ///< arguments kept as written, as Review rows
  std::set<std::string> unsure_;                        ///< CUDA library classes with a call that needs review

  /// True when `node` reaches `qname` through a leading name no import binds and the value that
  /// name stands for (`torch.cuda` for `dev.synchronize` → torch.cuda.synchronize) is renamed by
  /// the target's table, so it is rewritten where it is assigned.
  bool ThroughRewrittenAssignment(TSNode node, const std::string& qname) {
    std::string_view head = LeadingName(node);
    if (head.empty() || ImportBound(head)) return false;
    std::string_view text = NodeText(node, src_);
    // The longest dotted tail of the text that `qname` ends with: `.synchronize` of
    // `self.backend.synchronize`; empty for a bare name (the name stands for `qname` itself).
    for (size_t dot = text.find('.', head.size());; dot = text.find('.', dot + 1)) {
      std::string_view tail = dot == std::string_view::npos ? std::string_view() : text.substr(dot);
      if (qname.size() > tail.size() && qname.compare(qname.size() - tail.size(), tail.size(), tail) == 0) {
        std::string bound = qname.substr(0, qname.size() - tail.size());
        std::string renamed = target_.RewriteByPrefix(bound);
        return !renamed.empty() && renamed != bound;
      }
      if (dot == std::string_view::npos) return false;
    }
  }

  /// The identifier a dotted reference starts with (`a` of `a.b.c`, of `a.b(x).c` too).
  std::string_view LeadingName(TSNode node) const {
    for (;;) {
      NodeKind k = syn_.Kind(node);
      if (k == NodeKind::kAttribute) node = ts_node_child_by_field_id(node, syn_.f_object);
      else if (k == NodeKind::kCall) node = ts_node_child_by_field_id(node, syn_.f_function);
      else break;
      if (ts_node_is_null(node)) return {};
    }
    return syn_.Kind(node) == NodeKind::kIdentifier ? NodeText(node, src_) : std::string_view();
  }

  std::optional<std::set<std::string, std::less<>>> import_bound_;  ///< names the file's imports bind
  std::set<std::string, std::less<>> cuda_import_bound_;            ///< of those, the ones a rewritten import binds

  /// True when an import statement of the file binds `name` (`from m import name`,
  /// `import name`, `... as name`).
  bool ImportBound(std::string_view name) {
    if (!import_bound_) {
      import_bound_.emplace();
      ForEachNamedNode(root_, [&](TSNode n) {
        NodeKind k = syn_.Kind(n);
        if (k != NodeKind::kImportStatement && k != NodeKind::kImportFromStatement) return true;
        TSNode module = ts_node_child_by_field_id(n, syn_.f_module_name);
        std::vector<std::pair<std::string, std::string>> groups;
        std::string message;
        bool rewritten = k == NodeKind::kImportFromStatement && CudaImportGroups(n, groups, message);
        for (TSNode c : NamedChildren(n)) {
          if ((k == NodeKind::kImportFromStatement && ts_node_eq(c, module)) || syn_.Kind(c) == NodeKind::kComment)
            continue;
          std::string_view bound = NodeText(c, src_);
          if (syn_.Kind(c) == NodeKind::kAliasedImport)
            bound = NodeText(ts_node_child_by_field_id(c, syn_.f_alias), src_);
          else if (k == NodeKind::kImportStatement) bound = bound.substr(0, bound.find('.'));
          import_bound_->emplace(bound);
          if (rewritten) cuda_import_bound_.emplace(bound);
        }
        return false;
      });
    }
    return import_bound_->count(name) > 0;
  }

  const CudaLibraryClass* FindLibrary(const std::string& qname) const {
    for (const auto& lib : target_.cuda_libraries())
      if (lib.name == qname) return &lib;
    return nullptr;
  }

  /// The target's fused API for a CUDA library class, else (with --unsafe) the target's fused
  /// optimizer for its plain equivalent, else the plain equivalent. A class without a plain
  /// equivalent has only the fused API, and only with --unsafe: empty otherwise.
  std::string LibraryReplacement(const CudaLibraryClass& lib) {
    if (lib.plain.empty()) {
      const std::string* fused = Find(facts_.fused_modules, lib.name);
      return fused && unsafe_ ? *fused : std::string();
    }
    if (const std::string* fused = Find(facts_.fused_modules, lib.name)) return *fused;
    if (const std::string* fused = unsafe_ ? Find(facts_.fused_optimizers, lib.plain) : nullptr) return *fused;
    return lib.plain;
  }

  /// A call of a CUDA-only library class: one using a keyword its equivalent lacks is listed for
  /// review; one spelled in full (`apex.optimizers.FusedAdam(...)`) is renamed here, one through
  /// an imported name by its import (CudaLibraryImports).
  bool CudaLibraryCall(const CallEvent& ev, TSNode fn) {
    const CudaLibraryClass* lib = FindLibrary(ev.lookup.front());
    if (!lib) return false;
    if (!lib->kept.empty()) {
      // Ports keep the library's own call (its fork runs on the target): listed, not changed.
      std::string lacks;
      for (const auto& a : ev.args)
        for (const auto& k : lib->unsure_keywords)
          if (a.keyword == k) lacks += "; keyword " + k + " has no counterpart there";
      unsure_.insert(lib->name);
      Review(ev.node, lib->name + " kept: " + lib->kept + "; torch's equivalent is " + lib->plain + lacks +
                          " (check that the target's build of the library provides it)");
      return true;
    }
    std::string use = LibraryReplacement(*lib);
    if (use.empty()) {
      const std::string* fused = Find(facts_.fused_modules, lib->name);
      unsure_.insert(lib->name);
      Review(ev.node, lib->name + " not ported: torch has no equivalent" +
                          (fused ? "; the target's is " + *fused + " (--unsafe makes it, check the accuracy)"
                                 : "; port it by hand"));
      return true;
    }
    std::string why;
    for (const auto& a : ev.args) {
      if (a.splat && why.empty()) why = "**kwargs may hold keywords " + use + " lacks";
      for (const auto& k : lib->unsure_keywords)
        if (a.keyword == k) why = "keyword " + k + " has no counterpart in " + use;
    }
    if (!why.empty()) {
      unsure_.insert(lib->name);
      Review(ev.node, lib->name + " → " + use + " not made: " + why + "; port it by hand");
      return true;
    }
    if (NodeText(fn, src_) == lib->name) {
      Add(fn, use, "ModuleReplace", lib->name + " → " + use, "cuda_library");
      NeedModuleOf(use);
    }
    return true;
  }

  void NoteCudaLeft(TSNode node, const std::string& qname) {
    const std::string& cuda = target_.cuda().device_module;
    if (cuda.empty() || !facts_.device_module.empty() || qname.size() <= cuda.size() ||
        qname.compare(0, cuda.size(), cuda) != 0 || qname[cuda.size()] != '.')
      return;
    cuda_left_.insert({StartLine(node), ts_node_start_point(node).column + 1});
  }
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
        out.push_back({ts_node_start_byte(attr), ts_node_end_byte(attr), it->second, StartLine(attr), EndLine(attr),
                       "AttributeModify", "." + it->first + " → ." + it->second, "device_api"});
    }
    return true;
  });
}

/// True when an import statement anywhere in the file names `module` (also inside `try:`).
bool ImportsModule(const PySyntax& syn, TSNode root, std::string_view src, const std::string& module) {
  bool found = false;
  ForEachNamedNode(root, [&](TSNode n) {
    if (found) return false;
    NodeKind k = syn.Kind(n);
    if (k == NodeKind::kImportStatement || k == NodeKind::kImportFromStatement) {
      std::string_view text = NodeText(n, src);
      for (size_t at = text.find(module); at != std::string_view::npos; at = text.find(module, at + 1)) {
        size_t end = at + module.size();
        bool starts = at == 0 || !(std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_');
        bool ends = end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_');
        if (starts && ends) found = true;
      }
      return false;
    }
    return true;
  });
  return found;
}

/// `import torch...` / `from torch... import` (torch itself or a submodule, not torchvision).
bool IsTorchImport(std::string_view text) {
  for (std::string_view head : {"import", "from"}) {
    if (text.rfind(head, 0) != 0) continue;
    size_t at = text.find_first_not_of(" \t\\\r\n", head.size());
    if (at == std::string_view::npos || at == head.size() || text.compare(at, 5, "torch") != 0) continue;
    size_t end = at + 5;
    return end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_');
  }
  return false;
}

/// Where a new top-level import line goes.
struct InsertPoint {
  uint32_t byte = 0, line = 1;
  bool newline_before = false;  ///< the file's last line has no line end
};

/// After the first top-level torch import when `after_torch` and there is one; else after the
/// leading comments (shebang, coding line), the module docstring and the `from __future__`
/// imports — never above them.
InsertPoint FindInsertPoint(const PySyntax& syn, const ParsedSource& src, bool after_torch) {
  TSNode root = src.root();
  uint32_t count = ts_node_named_child_count(root);
  long after = -1;
  if (after_torch) {
    for (uint32_t i = 0; i < count && after < 0; ++i) {
      TSNode c = ts_node_named_child(root, i);
      NodeKind k = syn.Kind(c);
      if ((k == NodeKind::kImportStatement || k == NodeKind::kImportFromStatement) &&
          IsTorchImport(NodeText(c, src.source)))
        after = static_cast<long>(ts_node_end_byte(c));
    }
  }
  if (after < 0) {
    bool first_statement = true;
    for (uint32_t i = 0; i < count; ++i) {
      TSNode c = ts_node_named_child(root, i);
      NodeKind k = syn.Kind(c);
      bool docstring = first_statement && k == NodeKind::kExpressionStatement && ts_node_named_child_count(c) == 1 &&
                       syn.Kind(ts_node_named_child(c, 0)) == NodeKind::kString;
      if (k == NodeKind::kComment || k == NodeKind::kFutureImportStatement || docstring) {
        after = static_cast<long>(ts_node_end_byte(c));
        if (k != NodeKind::kComment) first_statement = false;
        continue;
      }
      break;
    }
  }
  InsertPoint p;
  const std::string& s = src.source;
  size_t pos = 0;
  if (after >= 0) {
    pos = AfterLineEnd(s, static_cast<size_t>(after));
    if (pos == std::string::npos) {
      pos = s.size();
      p.newline_before = true;
    }
  }
  if (pos < kUtf8Bom.size() && StartsWithBom(s)) pos = kUtf8Bom.size();  // the BOM stays first
  p.byte = static_cast<uint32_t>(pos);
  p.line = LineOfByte(s, pos);
  return p;
}

/// An edit inserting `line` (with the file's line ending) at `p`.
Edit InsertLineEdit(const InsertPoint& p, const std::string& line, std::string_view eol, const char* operation) {
  std::string text = (p.newline_before ? std::string(eol) : "") + line + std::string(eol);
  return {p.byte, p.byte, std::move(text), p.line, p.line, operation, line, "import"};
}

/// A script entry point: a top-level `if __name__ == "__main__":`.
bool IsEntryFile(const PySyntax& syn, const ParsedSource& src) {
  TSNode root = src.root();
  uint32_t count = ts_node_named_child_count(root);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode c = ts_node_named_child(root, i);
    if (syn.Kind(c) != NodeKind::kIfStatement) continue;
    std::string_view cond = NodeText(ts_node_child_by_field_id(c, syn.f_condition), src.source);
    if (cond.find("__name__") != std::string_view::npos && cond.find("__main__") != std::string_view::npos) return true;
  }
  return false;
}

/// The modules the top-level imports of a file load (outside functions and classes; inside `if`,
/// `try`, `with` blocks too): every imported module with its packages, and for `from m import x`
/// also `m.x` (a submodule, when it is one). Relative imports are made absolute.
void CollectTopLevelImports(const PySyntax& syn, TSNode block, std::string_view src, const ModuleSummary& from,
                            std::vector<std::string>& out) {
  auto add = [&](const std::string& module) {
    for (size_t dot = module.find('.'); dot != std::string::npos; dot = module.find('.', dot + 1))
      out.push_back(module.substr(0, dot));
    if (!module.empty()) out.push_back(module);
  };
  for (TSNode n : NamedChildren(block)) {
    switch (syn.Kind(n)) {
      case NodeKind::kImportStatement:
        for (TSNode c : NamedChildren(n)) {
          TSNode name = syn.Kind(c) == NodeKind::kAliasedImport ? ts_node_child_by_field_id(c, syn.f_name) : c;
          if (!ts_node_is_null(name) && syn.Kind(name) == NodeKind::kDottedName) add(std::string(NodeText(name, src)));
        }
        break;
      case NodeKind::kImportFromStatement: {
        TSNode mod = ts_node_child_by_field_id(n, syn.f_module_name);
        if (ts_node_is_null(mod)) break;
        int level = 0;
        std::string module;
        if (syn.Kind(mod) == NodeKind::kRelativeImport) {
          for (TSNode c : NamedChildren(mod)) {
            if (syn.Kind(c) == NodeKind::kImportPrefix) level = static_cast<int>(NodeText(c, src).size());
            else module = std::string(NodeText(c, src));
          }
          module = ResolveRelativeModule(from.module_name, from.is_package, level, module);
          if (module.empty()) break;
        } else {
          module = std::string(NodeText(mod, src));
        }
        add(module);
        for (TSNode c : NamedChildren(n)) {
          if (ts_node_eq(c, mod)) continue;
          TSNode name = syn.Kind(c) == NodeKind::kAliasedImport ? ts_node_child_by_field_id(c, syn.f_name) : c;
          if (!ts_node_is_null(name) && syn.Kind(name) == NodeKind::kDottedName)
            out.push_back(module + "." + std::string(NodeText(name, src)));
        }
        break;
      }
      case NodeKind::kIfStatement:
      case NodeKind::kTryStatement:
      case NodeKind::kWithStatement:
      case NodeKind::kElseClause:
      case NodeKind::kElifClause:
      case NodeKind::kExceptClause:
      case NodeKind::kFinallyClause:
      case NodeKind::kBlock: CollectTopLevelImports(syn, n, src, from, out); break;
      default: break;
    }
  }
}

/// A shell launch script (`*.sh`, `*.bash`): its environment variables are renamed.
bool IsLaunchScript(const fs::path& path) {
  std::string ext = path.extension().string();
  return ext == ".sh" || ext == ".bash";
}

/// Renames of environment variables in a shell launch script, by the target's renames.env_vars:
/// whole names only (`export CUDA_VISIBLE_DEVICES=0`, `CUDA_VISIBLE_DEVICES=0,1 python train.py`,
/// `$CUDA_VISIBLE_DEVICES`, `${CUDA_VISIBLE_DEVICES}`), never inside a longer name or a comment.
std::vector<Edit> LaunchScriptEdits(std::string_view text, const std::map<std::string, std::string>& env_vars) {
  std::vector<Edit> edits;
  auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  uint32_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
      continue;
    }
    if (text[i] == '#' && (i == line_start || std::isspace(static_cast<unsigned char>(text[i - 1])))) {
      size_t nl = text.find('\n', i);  // a comment runs to the line's end
      i = (nl == std::string_view::npos ? text.size() : nl) - 1;
      continue;
    }
    if (!name_char(text[i]) || (i > 0 && name_char(text[i - 1]))) continue;
    size_t end = i;
    while (end < text.size() && name_char(text[end])) ++end;
    auto it = env_vars.find(std::string(text.substr(i, end - i)));
    if (it != env_vars.end())
      edits.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(end), it->second, line, line, "ReplaceString",
                       it->first + " → " + it->second + " (launch script)", "launch_script"});
    i = end - 1;
  }
  return edits;
}

/// The launch scripts of the project with their edits, in the order of project.sources.others.
struct ScriptResult {
  const SourceFile* file;
  std::string original, text;
  std::vector<Edit> edits;
};

std::vector<ScriptResult> MigrateLaunchScripts(const LoadedProject& project, const target::TargetFacts& facts,
                                               Logger& log) {
  std::vector<ScriptResult> out;
  if (facts.renames.env_vars.empty()) return out;
  for (const auto& f : project.sources.others) {
    if (!IsLaunchScript(f.path)) continue;
    auto text = ReadFile(f.path);
    if (!text.ok()) {
      log.Warning(f.display + ": not read (" + text.status().message() + "); copied unchanged");
      continue;
    }
    ScriptResult r{&f, std::move(*text), {}, {}};
    r.edits = LaunchScriptEdits(r.original, facts.renames.env_vars);
    if (r.edits.empty()) continue;
    r.text = ApplyEdits(r.original, r.edits);
    out.push_back(std::move(r));
  }
  return out;
}

/// The migration of one Python file: its edited text and what was done or left for review.
struct FileResult {
  std::string text;
  std::vector<Edit> edits;
  std::vector<Edit> reviews;  ///< listed in change_list.csv, not made
  std::vector<FileProblem> warnings;
  bool reverted = false;
  std::string revert_reason;
  /// For a file read as Latin-1 or cp1252 and edited: its own bytes (`text` is then encoded the
  /// same way); empty otherwise, the parsed source being those bytes.
  std::string original;
  /// The target's import line, when the file is changed and does not import the module: made or
  /// not by the import policy once every file is migrated (PlaceTargetImports).
  std::optional<Edit> import_edit;
  bool entry = false;                 ///< has a top-level `if __name__ == "__main__":`
  bool imports_target = false;        ///< its top-level imports load the target's module
  std::vector<std::string> imported;  ///< the modules its top-level imports load
};

/// The bytes of the file as it is on disk (what the migrated text is compared and diffed with).
const std::string& SourceBytes(const PyFile& py, const FileResult& r) {
  return r.original.empty() ? py.parsed.source : r.original;
}

/// True when an edit writes a name of `module` (`torch_npu.` followed by a name).
bool WritesModuleName(const std::vector<Edit>& edits, const std::string& module) {
  auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (const auto& e : edits) {
    const std::string& t = e.replacement;
    for (size_t at = t.find(module + "."); at != std::string::npos; at = t.find(module + ".", at + 1))
      if (at == 0 || (!name_char(t[at - 1]) && t[at - 1] != '.')) return true;
  }
  return false;
}

/// Decides where the target's import line goes (MigrateOptions::import_policy) and applies it.
/// kEntry: an entry script and a file that writes a name of the module get it; a file that an
/// entry script importing the module loads through top-level imports does not (the module is
/// loaded before it runs); any other file keeps it, with a Review row when the project has entry
/// scripts (it may be run only through one of them, which would make the line redundant).
void PlaceTargetImports(const MigrateOptions& opt, const LoadedProject& project, const target::TargetFacts& facts,
                        std::vector<FileResult>& out, Logger& log) {
  std::unordered_map<const ModuleSummary*, size_t> file_of;
  for (size_t i = 0; i < project.py.size(); ++i)
    if (project.py[i].summary) file_of[project.py[i].summary] = i;
  // Files loaded, through top-level imports, by an entry script that imports the module.
  std::vector<char> reached(out.size(), 0);
  std::vector<size_t> queue;
  bool any_entry = false;
  for (size_t i = 0; i < out.size(); ++i) {
    any_entry = any_entry || out[i].entry;
    if (out[i].entry && !out[i].reverted && (out[i].imports_target || out[i].import_edit)) queue.push_back(i);
  }
  for (size_t head = 0; head < queue.size(); ++head) {
    for (const auto& module : out[queue[head]].imported) {
      auto it = file_of.find(project.index.Find(module));
      if (it == file_of.end() || reached[it->second]) continue;
      reached[it->second] = 1;
      queue.push_back(it->second);
    }
  }
  size_t left_out = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    FileResult& r = out[i];
    if (!r.import_edit || r.reverted) continue;
    bool names = WritesModuleName(r.edits, facts.python_module);
    bool every = opt.import_policy == MigrateOptions::ImportPolicy::kEveryFile;
    if (!every && !r.entry && !names && reached[i]) {
      ++left_out;
      continue;
    }
    if (!every && !r.entry && !names && any_entry)
      r.reviews.push_back({r.import_edit->start_byte, r.import_edit->start_byte, "", r.import_edit->start_line,
                           r.import_edit->start_line, "Review",
                           facts.import_line +
                               " added: no entry script of the project (top-level `if __name__ == \"__main__\":`) "
                               "imports this module at its top level; if it only runs under one that imports " +
                               facts.python_module + ", the line can go",
                           "review"});
    r.edits.insert(r.edits.begin(), *r.import_edit);  // before other imports inserted at the same place
    r.text = ApplyEdits(project.py[i].parsed.source, r.edits);
    if (!project.py[i].codec.empty()) {  // an ASCII line: the encoding that wrote the rest writes it too
      auto encoded = EncodeSource(r.text, project.py[i].codec);
      if (encoded.ok()) r.text = std::move(*encoded);
    }
  }
  if (left_out)
    log.Info(facts.import_line + " left to the entry scripts that load " + std::to_string(left_out) + " changed file" +
             (left_out == 1 ? "" : "s") + " (--import-policy entry)");
}

/// True when a top-level statement imports torch (or a submodule of it): the run-time transfer
/// only matters to a script that loads torch itself.
bool ImportsTorch(const PySyntax& syn, const ParsedSource& src) {
  for (TSNode c : NamedChildren(src.root())) {
    NodeKind k = syn.Kind(c);
    if ((k == NodeKind::kImportStatement || k == NodeKind::kImportFromStatement) &&
        IsTorchImport(NodeText(c, src.source)))
      return true;
  }
  return false;
}

/// --transfer-only: the target's `import_line` (unless the file imports the module already) and
/// then its `transfer_import`, after the first torch import: the two lines Ascend's transfer
/// guide puts at the top of an entry script (`import torch_npu`,
/// `from torch_npu.contrib import transfer_to_npu`).
void TransferImportEdits(const PySyntax& syn, const ParsedSource& src, const target::TargetFacts& facts,
                         std::string_view eol, std::vector<Edit>& edits) {
  if (src.source.find(facts.transfer_import) != std::string::npos) return;
  InsertPoint at = FindInsertPoint(syn, src, true);
  if (!facts.import_line.empty() && !facts.python_module.empty() &&
      !ImportsModule(syn, src.root(), src.source, facts.python_module)) {
    edits.push_back(InsertLineEdit(at, facts.import_line, eol, "InsertImport"));
    at.newline_before = false;  // the line above ends the file's last line already
  } else if (!facts.python_module.empty()) {
    // below the file's own top-level `import torch_npu`, when it has one
    for (TSNode c : NamedChildren(src.root())) {
      NodeKind k = syn.Kind(c);
      if ((k != NodeKind::kImportStatement && k != NodeKind::kImportFromStatement) ||
          !ImportsModule(syn, c, src.source, facts.python_module))
        continue;
      size_t pos = AfterLineEnd(src.source, ts_node_end_byte(c));
      at.newline_before = pos == std::string::npos;
      at.byte = static_cast<uint32_t>(at.newline_before ? src.source.size() : pos);
      at.line = LineOfByte(src.source, at.byte);
      break;
    }
  }
  edits.push_back(InsertLineEdit(at, facts.transfer_import, eol, "InsertImport"));
}

/// Collects the edits of every Python file of `project` (in parallel) and checks that every
/// edited file parses and compiles with CPython; a file whose edits break it is marked reverted.
std::vector<FileResult> MigratePythonFiles(const MigrateOptions& opt, LoadedProject& project, const Target& target,
                                           const CompiledRules& compiled, ThreadPool& pool, Logger& log) {
  const target::TargetFacts& facts = target.facts();
  std::vector<FileResult> out(project.py.size());
  std::vector<std::unique_ptr<PythonParser>> parsers;
  for (int i = 0; i < pool.size(); ++i) parsers.push_back(std::make_unique<PythonParser>());
  Progress progress(log, project.py.size());
  pool.ParallelFor(project.py.size(), [&](int worker, size_t i) {
    PyFile& py_file = project.py[i];
    FileResult& r = out[i];
    BigTreeGuard one_big_tree(project, py_file.parsed.source.size());
    const ParsedSource* tree = py_file.parsed.has_error() ? nullptr : TreeOf(project, py_file, *parsers[worker]);
    if (!py_file.summary || !tree) {
      r.text.clear();  // copied unchanged
      progress.Done("Skipped " + py_file.file->display + " (not migrated: see the warnings above).");
      return;
    }
    struct {
      const SourceFile* file;
      const ParsedSource& parsed;
      ModuleSummary* summary;
    } f{py_file.file, *tree, py_file.summary};
    std::string_view eol = LineEnding(f.parsed.source);
    if (opt.transfer_only) {
      bool entry = std::any_of(opt.entries.begin(), opt.entries.end(), [&](const std::string& e) {
        return fs::path(e).lexically_normal().generic_string() == f.file->rel;
      });
      if (entry ||
          (opt.entries.empty() && IsEntryFile(project.syntax, f.parsed) && ImportsTorch(project.syntax, f.parsed)))
        TransferImportEdits(project.syntax, f.parsed, facts, eol, r.edits);
    } else {
      MigrationCollector collector(project.syntax, f.parsed, target, compiled, opt.unsafe, r.edits, r.warnings);
      FileWalker(
          project.syntax, f.parsed, *f.summary, project.index, [&](const std::string& q) { return target.Known(q); },
          collector)
          .Run();
      AttributeRenameEdits(project.syntax, f.parsed.root(), f.parsed.source, facts.renames.attributes, r.edits);
      collector.ComposeTemplates();
      collector.DropForeignAndUnchanged();
      collector.CudaLibraryImports(f.parsed.root());
      collector.CudaExtensionImports(f.parsed.root());
      collector.CudaModuleImports(f.parsed.root());
      collector.AddCudaLeftWarning();
      r.reviews = std::move(collector.reviews);
      r.entry = IsEntryFile(project.syntax, f.parsed);
      CollectTopLevelImports(project.syntax, f.parsed.root(), f.parsed.source, *f.summary, r.imported);
      r.imports_target = !facts.python_module.empty() &&
                         std::find(r.imported.begin(), r.imported.end(), facts.python_module) != r.imported.end();
      if (!r.edits.empty() && !facts.import_line.empty() &&
          !ImportsModule(project.syntax, f.parsed.root(), f.parsed.source, facts.python_module))
        r.import_edit =
            InsertLineEdit(FindInsertPoint(project.syntax, f.parsed, true), facts.import_line, eol, "InsertImport");
      for (const auto& module : collector.extra_imports)
        if (!ImportsModule(project.syntax, f.parsed.root(), f.parsed.source, module))
          r.edits.push_back(
              InsertLineEdit(FindInsertPoint(project.syntax, f.parsed, true), "import " + module, eol, "InsertImport"));
    }
    r.text = ApplyEdits(f.parsed.source, r.edits);
    ReleaseTree(project, py_file);  // before the check below parses the edited text
    for (auto& w : r.warnings) w.file = f.file->display;
    // Every migrated file must parse; a rewrite that breaks it is undone (CPython checks below).
    if (!r.edits.empty()) {
      ParsedSource check = parsers[worker]->Parse(r.text);
      if (!check.tree || check.has_error()) {
        r.reverted = true;
        r.revert_reason = "the migrated file would not parse";
      }
    }
    progress.Done("Migrated " + f.file->display + " (" + std::to_string(r.edits.size()) + " changes).");
  });

  // A file read as Latin-1 or cp1252 is written back in that encoding: its own bytes where it was
  // not edited. `original` holds those bytes for the compile check and the patch.
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string& codec = project.py[i].codec;
    FileResult& r = out[i];
    if (codec.empty() || r.edits.empty() || r.reverted) continue;
    auto encoded = EncodeSource(r.text, codec);
    auto source = EncodeSource(project.py[i].parsed.source, codec);
    if (!encoded.ok() || !source.ok()) {
      r.reverted = true;
      r.revert_reason = "the migrated text cannot be written in " + codec + " (" +
                        (encoded.ok() ? source.status() : encoded.status()).message() + ")";
      continue;
    }
    r.text = std::move(*encoded);
    r.original = std::move(*source);
  }

  // Every edited file is compiled by CPython, all in one process; a file whose edits break it is
  // left unchanged (an original that does not compile either keeps its edits, with a warning).
  {
    std::vector<size_t> which;
    std::vector<PythonCheckInput> inputs;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].edits.empty() || out[i].reverted) continue;
      which.push_back(i);
      inputs.push_back({out[i].text, SourceBytes(project.py[i], out[i])});
    }
    if (!inputs.empty()) {
      auto verdicts = CompileWithPython(inputs, opt.python.empty() ? "python3" : opt.python);
      if (!verdicts.ok()) {
        log.Warning("the migrated files were not compiled with CPython (" + verdicts.status().message() +
                    "); they were checked with the tree-sitter parser only");
      } else {
        for (size_t k = 0; k < which.size(); ++k) {
          const PythonCheckVerdict& v = (*verdicts)[k];
          FileResult& r = out[which[k]];
          if (v.compiles) continue;
          std::string where = v.line ? " (line " + std::to_string(v.line) + ")" : "";
          if (v.original_compiles) {
            r.reverted = true;
            r.revert_reason = "the migrated file does not compile with python3: " + v.message + where;
          } else {
            r.warnings.push_back(
                {project.py[which[k]].file->display, v.line, 0, "not_compiled",
                 "python3 cannot compile the original either (" + v.message + where + "); migrated all the same"});
          }
        }
      }
    }
  }
  // After the checks, so that an entry script left unchanged does not count as importing the module
  // (an inserted import line keeps a file parsing and compiling).
  if (!opt.transfer_only) PlaceTargetImports(opt, project, facts, out, log);
  return out;
}

/// Adds one file's edits and review rows to the report's changes, by line.
void AppendChanges(MigrateReport& report, const std::string& display, std::vector<Edit> edits,
                   const std::vector<Edit>& reviews) {
  edits.insert(edits.end(), reviews.begin(), reviews.end());
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) {
    return std::tie(a.start_line, a.start_byte) < std::tie(b.start_line, b.start_byte);
  });
  for (const auto& e : edits)
    report.changes.push_back({display, e.start_line, e.end_line, e.operation, e.message, e.edit_class});
}

/// `migrate --dry-run`: the changes and warnings of a migration, with nothing written.
Expected<MigrateReport> DryRunMigrate(const MigrateOptions& opt, Context& ctx, const Target& target,
                                      const CompiledRules& compiled, const fs::path& input, MigrateReport report) {
  ThreadPool pool(ctx.jobs);
  LoadedProject project;
  LoadProject({input,
               report.project,
               {report.results_dir, report.reports_dir},
               {},
               opt.max_file_bytes,
               target.facts().DeviceMethods()},
              ctx.logger, pool, project);
  std::vector<FileResult> out = MigratePythonFiles(opt, project, target, compiled, pool, ctx.logger);
  for (size_t i = 0; i < project.py.size(); ++i) {
    FileResult& r = out[i];
    for (auto& w : r.warnings) {
      ctx.logger.Warning(w.file + (w.line ? ":" + std::to_string(w.line) : "") + ": " + w.message);
      report.warnings.push_back(std::move(w));
    }
    if (r.reverted) {
      report.warnings.push_back(
          {project.py[i].file->display, 0, 0, "not_migrated", r.revert_reason + "; left unchanged"});
      r.edits.clear();
    }
    if (!r.edits.empty()) ++report.files_changed;
    AppendChanges(report, project.py[i].file->display, std::move(r.edits), r.reviews);
  }
  if (!opt.transfer_only)
    for (auto& script : MigrateLaunchScripts(project, target.facts(), ctx.logger)) {
      ++report.files_changed;
      AppendChanges(report, script.file->display, std::move(script.edits), {});
    }
  report.warnings.insert(report.warnings.end(), project.problems.begin(), project.problems.end());
  ctx.logger.Info("Dry run: " + std::to_string(report.files_changed) + " files would change; nothing was written.");
  return report;
}

/// The input folder must exist and be a folder.
Status CheckInputFolder(const MigrateOptions& opt, const fs::path& input) {
  std::error_code ec;
  if (fs::is_directory(input, ec)) return Status::Ok();
  std::string what = "input " + opt.input.string() + (fs::exists(input, ec) ? " is not a folder" : " does not exist") +
                     "; give the folder of the project to migrate (-i DIR)";
  return fs::exists(input, ec) ? InvalidArgument(what) : NotFound(what);
}

/// The target must be one migrate can write for, and the options must fit it and the input.
Status CheckTargetOptions(const MigrateOptions& opt, const Context& ctx, const Target& target, const fs::path& input) {
  std::error_code ec;
  const target::TargetFacts& facts = target.facts();
  if (!facts.migratable()) return InvalidArgument(target::CheckTargetChoice(ctx.data_dir, opt.target, true));
  if (opt.transfer_only && facts.transfer_import.empty())
    return InvalidArgument("target " + target.name() +
                           " names no transfer_import in its target.json; "
                           "--transfer-only needs one");
  if (!opt.entries.empty() && !opt.transfer_only) return InvalidArgument("--entry is used with --transfer-only");
  for (const auto& e : opt.entries) {
    fs::path p = fs::path(e).lexically_normal();
    if (p.is_absolute() || p.empty() || *p.begin() == ".." || !fs::is_regular_file(input / p, ec))
      return InvalidArgument("--entry " + e + ": not a file inside the input folder (give its path relative to it)");
  }
  return Status::Ok();
}

/// The report's header: target, options, project name and output folders.
MigrateReport NewMigrateReport(const MigrateOptions& opt, const Target& target, const fs::path& input) {
  MigrateReport report;
  report.target = target.name();
  report.unsafe = opt.unsafe;
  report.transfer_only = opt.transfer_only;
  report.list_version = target.list_version();
  report.project = input.filename().string();
  const std::string& base = report.project;
  report.results_dir = fs::absolute(opt.output) / (base + "_msft");
  report.reports_dir = fs::absolute(opt.output) / MigrateReportsFolderName(base);
  return report;
}

/// The output side of a migration: the migrated copy (`results`) and the reports folder, their
/// markers, the files written into them, the patch, and the first error met while writing (a
/// failed write is logged and the others go on).
class MigrateOutput {
 public:
  MigrateOutput(Logger& log, MigrateReport& report)
      : log_(log), report_(report), results_(report.results_dir), reports_(report.reports_dir) {}

  /// A folder this command did not write is never overwritten without --force (docs/safety.md);
  /// then both folders are created.
  Status Prepare(bool force) {
    reused_ = fs::exists(results_, ec_);
    marker_ = reused_ ? ReadOutputMarker(results_) : OutputMarker{};
    for (const fs::path& folder : {results_, reports_}) {
      const OutputMarker m = folder == results_ ? marker_ : ReadOutputMarker(folder);
      if (!force && m.command != "migrate" && fs::exists(folder, ec_) && !fs::is_empty(folder, ec_))
        return InvalidArgument("output folder " + folder.string() +
                               " already exists and was not written by portkit migrate; remove it, choose another "
                               "-o, or give --force to write into it");
      if (!force && m.command == "migrate" && m.running)
        return InvalidArgument("output folder " + folder.string() +
                               " is being written by another portkit migrate (pid " + std::to_string(m.pid) +
                               "); wait for it to end, or give --force");
    }
    for (const fs::path& folder : {results_, reports_}) {
      fs::create_directories(folder, ec_);
      if (ec_ || !fs::is_directory(folder, ec_))
        return IoError("output folder " + folder.string() + " cannot be created" + (ec_ ? ": " + ec_.message() : ""));
    }
    return Status::Ok();
  }

  /// Room for the copy, measured before anything is written: a full disk never leaves a copy cut
  /// half-way, and a sparse file is never written out in full silently (docs/safety.md). Then the
  /// folders are marked before the first file is written (docs/safety.md, Crash markers): a run
  /// killed from here on leaves a marker that the next run recognises; it lists what this run
  /// may write and what the earlier run wrote, so the next run still removes the files of
  /// neither.
  Status Start(const LoadedProject& project) {
    PORTKIT_RETURN_IF_ERROR(CheckRoom(project));
    if (reused_ && marker_.command == "migrate" && !marker_.finished) {
      log_.Warning(results_.string() + ": an earlier portkit migrate (pid " + std::to_string(marker_.pid) +
                   ") into this folder did not finish (killed?); its output is replaced");
      for (const auto& name : RemoveStaleTemporariesBelow(results_))
        log_.Warning(name + ": removed (left by the run that was killed)");
    }
    std::vector<std::string> planned = marker_.files;
    for (const auto& f : project.sources.python) planned.push_back(f.rel);
    for (const auto* group : {&project.sources.cpp, &project.sources.others, &project.sources.links})
      for (const auto& f : *group) planned.push_back(f.rel);
    std::sort(planned.begin(), planned.end());
    planned.erase(std::unique(planned.begin(), planned.end()), planned.end());
    PORTKIT_RETURN_IF_ERROR(MarkOutputStarted(results_, "migrate", planned));
    PORTKIT_RETURN_IF_ERROR(MarkOutputStarted(reports_, "migrate", {"migration.patch"}));
    return Status::Ok();
  }

  /// Each Python file: migrated (its changes in the report and the patch) or copied unchanged.
  void WritePythonFiles(const LoadedProject& project, std::vector<FileResult>& out) {
    for (size_t i = 0; i < project.py.size(); ++i) {
      const SourceFile& sf = *project.py[i].file;
      FileResult& r = out[i];
      fs::path dest = results_ / sf.rel;
      for (const auto& w : r.warnings) {
        log_.Warning(w.file + (w.line ? ":" + std::to_string(w.line) : "") + ": " + w.message);
        report_.warnings.push_back(w);
      }
      if (r.reverted) {
        log_.Error(sf.display + ": " + r.revert_reason + "; left unchanged");
        report_.warnings.push_back({sf.display, 0, 0, "not_migrated", r.revert_reason + "; left unchanged"});
      }
      if (r.text.empty() || r.edits.empty() || r.reverted) {
        AppendChanges(report_, sf.display, {}, r.reviews);
        Write(dest, [&] { return CopyFileAtomic(sf.path, dest); });
        continue;
      }
      AppendChanges(report_, sf.display, std::move(r.edits), r.reviews);
      patch_ += UnifiedDiff(SourceBytes(project.py[i], r), r.text, sf.rel);
      ++report_.files_changed;
      Write(dest, [&] { return WriteFileAtomic(dest, r.text); });
    }
  }

  /// The migrated launch scripts, the other files copied unchanged, and links copied as links,
  /// never as what they point to (docs/safety.md).
  void WriteOtherFiles(const LoadedProject& project, std::vector<ScriptResult> scripts) {
    for (auto& script : scripts) {
      fs::path dest = results_ / script.file->rel;
      AppendChanges(report_, script.file->display, std::move(script.edits), {});
      patch_ += UnifiedDiff(script.original, script.text, script.file->rel);
      ++report_.files_changed;
      Write(dest, [&] { return WriteFileAtomic(dest, script.text); });
    }
    for (const auto* group : {&project.sources.cpp, &project.sources.others})
      for (const auto& f : *group) {
        if (std::any_of(scripts.begin(), scripts.end(), [&](const ScriptResult& r) { return r.file == &f; })) continue;
        fs::path dest = results_ / f.rel;
        Write(dest, [&] { return CopyFileAtomic(f.path, dest); });
      }
    for (const auto& f : project.sources.links) {
      fs::path dest = results_ / f.rel;
      Write(dest, [&] { return CopySymlinkAtomic(f.path, dest); });
    }
  }

  /// The patch, the removal of files an earlier run wrote that this one did not, and the
  /// finished markers; the first error of the whole output, if any.
  Status Finish(const LoadedProject& project) {
    // Files the loader could not analyse were copied unchanged.
    report_.warnings.insert(report_.warnings.end(), project.problems.begin(), project.problems.end());
    Status st = WriteFileAtomic(reports_ / "migration.patch", patch_);
    if (!st.ok()) Failed(st);
    std::sort(report_.files_written.begin(), report_.files_written.end());
    RemoveStaleFiles();
    if (Status marked = MarkOutput(results_, "migrate", report_.files_written); !marked.ok() && first_error_.ok())
      first_error_ = marked;
    if (Status marked = MarkOutput(reports_, "migrate", {"migration.patch"}); !marked.ok() && first_error_.ok())
      first_error_ = marked;
    return first_error_;
  }

 private:
  Status CheckRoom(const LoadedProject& project) {
    std::vector<fs::path> copied;
    for (const auto& f : project.py) copied.push_back(f.file->path);
    for (const auto* group : {&project.sources.cpp, &project.sources.others})
      for (const auto& f : *group) copied.push_back(f.path);
    CopySize size = MeasureCopy(copied);
    for (const auto& note : size.sparse) log_.Warning(note);
    if (Status room = CheckFreeSpace(results_, size.bytes, "the migrated copy"); !room.ok()) {
      if (!reused_) fs::remove(results_, ec_);  // only the empty folders this run created
      fs::remove(reports_, ec_);
      return room;
    }
    return Status::Ok();
  }

  void Failed(const Status& st) {
    log_.Error(st.message());
    if (first_error_.ok()) first_error_ = st;
  }

  void Write(const fs::path& dest, const std::function<Status()>& fn) {
    fs::create_directories(dest.parent_path(), ec_);
    Status st = fn();
    if (!st.ok()) {
      Failed(st);
      return;
    }
    report_.files_written.push_back(dest.lexically_relative(results_).generic_string());
    ++report_.files_copied;
  }

  /// Files an earlier run wrote that this run did not (deleted from the project since) are
  /// removed, so the copy mirrors the project; only names recorded in the marker are touched.
  void RemoveStaleFiles() {
    for (const auto& old : marker_.files) {
      if (std::binary_search(report_.files_written.begin(), report_.files_written.end(), old)) continue;
      fs::path stale = results_ / old;
      if (fs::symlink_status(stale, ec_).type() == fs::file_type::directory) continue;
      if (fs::remove(stale, ec_)) log_.Warning(old + ": removed from the migrated copy (no longer in the project)");
    }
  }

  Logger& log_;
  MigrateReport& report_;
  const fs::path results_, reports_;
  std::error_code ec_;
  bool reused_ = false;
  OutputMarker marker_;
  std::string patch_;
  Status first_error_;
};

void LogMigrateStart(Logger& log, const MigrateOptions& opt, const Target& target) {
  log.Info("Migration to " + target.name() + " start" +
           (opt.transfer_only ? " (--transfer-only: `" + target.facts().transfer_import + "` at the entry points)"
            : opt.unsafe      ? " (--unsafe: affinity replacements too)"
                              : "") +
           ".");
}

void LogMigrateSuccess(Logger& log, const MigrateOptions& opt, const Target& target, const MigrateReport& report) {
  const fs::path& results = report.results_dir;
  const fs::path& reports = report.reports_dir;
  log.Info(Progress::Percent(1, 1) + "Migration success: " + std::to_string(report.files_changed) + " files changed, " +
           std::to_string(report.changes.size()) + " changes.");
  log.Info("The migrated copy is " + results.string() + "; the reports are beside it in " + reports.string() +
           " (`patch -p1 < " + (reports / "migration.patch").string() + "` applies the same changes to the original).");
  const target::TargetFacts& facts = target.facts();
  if (!opt.transfer_only && !facts.transfer_import.empty())
    log.Info("To run CUDA code unchanged instead, `portkit migrate --transfer-only` adds only `" +
             facts.transfer_import + "` to the entry scripts; it maps most CUDA calls to " + target.name() +
             " at run time.");
}

}  // namespace

Expected<MigrateReport> RunMigrate(const MigrateOptions& opt, Context& ctx) {
  Logger& log = ctx.logger;
  std::error_code ec;
  fs::path input(opt.input);
  PORTKIT_RETURN_IF_ERROR(CheckInputFolder(opt, input));
  input = fs::weakly_canonical(fs::absolute(input), ec);
  std::string version_warning;
  auto target = Target::Load(ctx.data_dir, opt.target, opt.version, &version_warning);
  if (!target.ok()) return target.status();
  PORTKIT_RETURN_IF_ERROR(CheckTargetOptions(opt, ctx, *target, input));
  const target::TargetFacts& facts = target->facts();
  auto rules = target::LoadMigrateRules(facts.dir);
  if (!rules.ok()) return rules.status();
  CompiledRules compiled(*rules);
  MigrateReport report = NewMigrateReport(opt, *target, input);
  if (opt.dry_run) return DryRunMigrate(opt, ctx, *target, compiled, input, std::move(report));
  MigrateOutput output(log, report);
  PORTKIT_RETURN_IF_ERROR(output.Prepare(opt.force));
  if (!version_warning.empty()) log.Warning(version_warning);
  LogMigrateStart(log, opt, *target);
  ThreadPool pool(ctx.jobs);
  LoadedProject project;
  // Latin-1 and cp1252 sources are rewritten as text and written back in their own encoding.
  LoadProject(
      {input, report.project, {report.results_dir, report.reports_dir}, {}, opt.max_file_bytes, facts.DeviceMethods()},
      log, pool, project);
  PORTKIT_RETURN_IF_ERROR(output.Start(project));

  std::vector<FileResult> out = MigratePythonFiles(opt, project, *target, compiled, pool, log);
  output.WritePythonFiles(project, out);
  std::vector<ScriptResult> scripts;
  if (!opt.transfer_only) scripts = MigrateLaunchScripts(project, facts, log);
  output.WriteOtherFiles(project, std::move(scripts));
  PORTKIT_RETURN_IF_ERROR(output.Finish(project));
  LogMigrateSuccess(log, opt, *target, report);
  return report;
}

}  // namespace portkit::analyse
