#pragma once
/// The modules of the analysed project (and of -env roots) with their summaries, and the
/// resolution of names across them: re-exports, relative and star imports, class bases.
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analyse/module_summary.h"
#include "analyse/value.h"

namespace portkit::analyse {

class ProjectIndex : public ModuleResolver {
 public:
  /// Registers a module under its canonical name and any extra aliases.
  void Add(std::unique_ptr<ModuleSummary> summary, const std::vector<std::string>& aliases = {});
  /// Resolves every top-level class and name once; afterwards lookups only read (thread-safe).
  void Freeze();

  Value Export(const std::string& module, const std::string& name) override;
  bool IsProjectModule(const std::string& module) const override;
  bool IsModuleSelfMethod(std::string_view method) const override;
  /// The target's device methods (`model.npu()` returns the module); set before Add/Freeze.
  void SetModuleSelfMethods(std::vector<std::string> methods) { self_methods_ = std::move(methods); }
  const ModuleSummary* Find(const std::string& module) const;

  /// The value bound by an import of `module` (relative `level` from `from`), attribute `attr`
  /// (empty for a plain module import).
  Value ImportValue(const ModuleSummary& from, const std::string& module, int level, const std::string& attr);
  /// Names a `from module import *` binds.
  std::vector<std::string> StarNames(const std::string& module);
  /// Value of a dotted expression evaluated in `module`'s top-level scope.
  Value EvalDotted(const ModuleSummary& module, std::string_view dotted);
  /// Public spellings of project functions and methods: qualified name → "pkg.name" for every
  /// module that defines or re-exports it under a public (no leading underscore) name.
  std::multimap<std::string, std::string> PublicSpellings();
  /// Computes torch_base and attribute values of a class evaluated in `module`'s scope.
  void ResolveClass(const ModuleSummary& module, ClassInfo& cls);

 private:
  Value ExportLocked(const std::string& module, const std::string& name);
  Value BindingValue(const ModuleSummary& m, const std::string& name, const TopBinding& b);
  Value ModuleValue(const std::string& module) const;

  std::vector<std::string> self_methods_;
  std::vector<std::unique_ptr<ModuleSummary>> owned_;
  std::unordered_map<std::string, const ModuleSummary*> modules_;
  std::unordered_set<std::string> packages_;  ///< every prefix of a module name
  std::recursive_mutex mu_;
  std::unordered_map<std::string, Value> memo_;
  std::unordered_set<std::string> in_progress_;
};

}  // namespace portkit::analyse
