#include "analyse/project_index.h"

#include <algorithm>

namespace portkit::analyse {

void ProjectIndex::Add(std::unique_ptr<ModuleSummary> summary, const std::vector<std::string>& aliases) {
  std::vector<std::string> names = aliases;
  names.push_back(summary->module_name);
  for (const auto& name : names) {
    modules_.emplace(name, summary.get());
    std::string prefix = name;
    while (!prefix.empty()) {
      packages_.insert(prefix);
      size_t dot = prefix.rfind('.');
      if (dot == std::string::npos) break;
      prefix.resize(dot);
    }
  }
  owned_.push_back(std::move(summary));
}

bool ProjectIndex::IsModuleSelfMethod(std::string_view method) const {
  return std::find(self_methods_.begin(), self_methods_.end(), method) != self_methods_.end();
}

bool ProjectIndex::IsProjectModule(const std::string& module) const { return packages_.count(module) > 0; }

const ModuleSummary* ProjectIndex::Find(const std::string& module) const {
  auto it = modules_.find(module);
  return it == modules_.end() ? nullptr : it->second;
}

Value ProjectIndex::ModuleValue(const std::string& module) const {
  return IsProjectModule(module) ? Value::UserModule(module) : Value::External(module);
}

void ProjectIndex::Freeze() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  for (const auto& m : owned_) {
    for (const auto& cls : m->classes) ResolveClass(*m, *cls);
    for (const auto& [name, binding] : m->names) ExportLocked(m->module_name, name);
  }
}

Value ProjectIndex::Export(const std::string& module, const std::string& name) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return ExportLocked(module, name);
}

Value ProjectIndex::ExportLocked(const std::string& module, const std::string& name) {
  std::string key = module + "\x1f" + name;
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  if (in_progress_.count(key)) return Value::Unknown();  // import cycle
  in_progress_.insert(key);
  Value result;
  const ModuleSummary* m = Find(module);
  if (m) {
    if (auto it = m->names.find(name); it != m->names.end()) {
      result = BindingValue(*m, name, it->second);
    } else {
      for (const auto& [star, level] : m->star_imports) {
        std::string abs = ResolveRelativeModule(m->module_name, m->is_package, level, star);
        if (!IsProjectModule(abs)) continue;
        for (const auto& exported : StarNames(abs)) {
          if (exported == name) {
            result = ExportLocked(abs, name);
            break;
          }
        }
        if (!result.is_unknown()) break;
      }
    }
  }
  if (result.is_unknown() && IsProjectModule(module + "." + name)) result = Value::UserModule(module + "." + name);
  in_progress_.erase(key);
  memo_[key] = result;
  return result;
}

Value ProjectIndex::BindingValue(const ModuleSummary& m, const std::string& name, const TopBinding& b) {
  switch (b.kind) {
    case TopBinding::Kind::kImportModule: return ModuleValue(b.module);
    case TopBinding::Kind::kImportFrom: return ImportValue(m, b.module, b.level, b.attr);
    case TopBinding::Kind::kFunction: return Value::UserFunction(m.module_name + "." + name);
    case TopBinding::Kind::kClass: {
      ClassInfo& cls = *m.classes[b.class_index];
      ResolveClass(m, cls);
      return Value::UserClass(&cls);
    }
    case TopBinding::Kind::kAssignCall: return CallResult(EvalDotted(m, b.dotted), this);
    case TopBinding::Kind::kAssignDotted: return EvalDotted(m, b.dotted);
    case TopBinding::Kind::kOther: return Value::Other();
  }
  return Value::Unknown();
}

Value ProjectIndex::ImportValue(const ModuleSummary& from, const std::string& module, int level,
                                const std::string& attr) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  std::string abs = ResolveRelativeModule(from.module_name, from.is_package, level, module);
  if (level > 0 && abs.empty() && module.empty()) return Value::Unknown();
  if (attr.empty()) return ModuleValue(abs);
  std::string sub = abs.empty() ? attr : abs + "." + attr;
  if (IsProjectModule(abs)) {
    const ModuleSummary* package = Find(abs);
    Value v = package ? ExportLocked(abs, attr) : Value::Unknown();
    if (v.is_unknown() && IsProjectModule(sub)) return Value::UserModule(sub);
    // `from . import ext_cuda` where the package neither defines nor star-imports the name and
    // no .py module has it: a compiled module beside the sources (a built extension).
    if (v.is_unknown() && (!package || (!package->names.count(attr) && package->star_imports.empty())))
      return Value::External(sub);
    return v;
  }
  if (level > 0) return Value::Unknown();  // a relative import that leaves the project
  return Value::External(sub);
}

std::multimap<std::string, std::string> ProjectIndex::PublicSpellings() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  std::multimap<std::string, std::string> out;
  // Canonical names only: aliases (a package root's modules without the root) are not how
  // users of the library import it.
  std::vector<std::pair<std::string, const ModuleSummary*>> modules;
  for (const auto& m : owned_) modules.emplace_back(m->module_name, m.get());
  std::sort(modules.begin(), modules.end());
  for (const auto& [module_name, m] : modules) {
    std::vector<std::string> names;
    // Captured by value: clang before 16 cannot capture a structured binding.
    auto exported = [summary = m](const std::string& name) {
      return summary->all && std::find(summary->all->begin(), summary->all->end(), name) != summary->all->end();
    };
    for (const auto& [name, b] : m->names) {
      // A name a plain module imports is its own helper, not a way users spell the API; a
      // package's imports (its __init__) and a module's __all__ are re-exports.
      bool imported = b.kind == TopBinding::Kind::kImportFrom || b.kind == TopBinding::Kind::kImportModule;
      if (imported && !m->is_package && !exported(name)) continue;
      names.push_back(name);
    }
    for (const auto& [star, level] : m->star_imports) {
      std::string abs = ResolveRelativeModule(m->module_name, m->is_package, level, star);
      for (const auto& s : StarNames(abs)) names.push_back(s);
    }
    for (const auto& name : names) {
      if (name.empty() || name[0] == '_') continue;
      Value v = ExportLocked(module_name, name);
      std::string spelling = module_name + "." + name;
      if (v.kind == ValueKind::kUserFunction) {
        out.emplace(v.name, spelling);
      } else if (v.kind == ValueKind::kUserClass && v.cls) {
        for (const auto& method : v.cls->methods) {
          if (!method.empty() && method[0] == '_' && method != "__init__" && method != "__call__") continue;
          out.emplace(v.cls->QualifiedName() + "." + method, spelling + "." + method);
        }
      }
    }
  }
  return out;
}

std::vector<std::string> ProjectIndex::StarNames(const std::string& module) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  const ModuleSummary* m = Find(module);
  if (!m) return {};
  if (m->all) return *m->all;
  std::vector<std::string> names;
  for (const auto& [name, b] : m->names)
    if (!name.empty() && name[0] != '_') names.push_back(name);
  return names;
}

Value ProjectIndex::EvalDotted(const ModuleSummary& module, std::string_view dotted) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  size_t dot = dotted.find('.');
  std::string head(dotted.substr(0, dot));
  Value v = ExportLocked(module.module_name, head);
  while (dot != std::string_view::npos && !v.is_unknown()) {
    size_t next = dotted.find('.', dot + 1);
    v = AttributeOf(v, dotted.substr(dot + 1, next == std::string_view::npos ? next : next - dot - 1), this);
    dot = next;
  }
  return v;
}

void ProjectIndex::ResolveClass(const ModuleSummary& module, ClassInfo& cls) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (cls.resolved) return;
  cls.resolved = true;  // set first: a class that inherits from itself through a cycle stops here
  for (const auto& base : cls.base_exprs) {
    Value v = EvalDotted(module, base);
    if (v.kind == ValueKind::kExternal && IsTorchClassName(v.name)) {
      if (cls.torch_base.empty()) cls.torch_base = v.name;
    } else if (v.kind == ValueKind::kUserClass && v.cls) {
      const ModuleSummary* owner = Find(v.cls->module);
      if (owner) ResolveClass(*owner, const_cast<ClassInfo&>(*v.cls));
      if (cls.torch_base.empty()) cls.torch_base = v.cls->torch_base;
      if (v.cls != &cls) cls.user_bases.push_back(v.cls);
    }
  }
  for (const auto& [attr, expr] : cls.attr_exprs) {
    Value v;
    switch (expr.kind) {
      case AttrExpr::Kind::kTensor: v = Value::Tensor(); break;
      case AttrExpr::Kind::kCall: v = CallResult(EvalDotted(module, expr.dotted), this); break;
      case AttrExpr::Kind::kDotted: v = EvalDotted(module, expr.dotted); break;
    }
    if (!v.is_unknown()) cls.attrs[attr] = v;
  }
}

}  // namespace portkit::analyse
