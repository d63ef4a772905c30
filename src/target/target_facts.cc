#include "target/target_facts.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <fstream>

namespace portkit::target {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFile = "target.json";
// Keys every target.json must have (docs/targets.md).
constexpr const char* kRequiredKeys[] = {"name", "kind", "device_type"};

// Reads one JSON document; `where` prefixes every error ("<dir>/target.json").
class FactsReader {
 public:
  explicit FactsReader(std::string where) : where_(std::move(where)) {}

  Status Error(const std::string& what) const { return ParseError(where_ + ": " + what); }

  Status String(simdjson::dom::element v, const std::string& key, std::string* out) const {
    std::string_view s;
    if (v.get_string().get(s)) return Error("\"" + key + "\" must be a string");
    *out = std::string(s);
    return Status::Ok();
  }

  Status Kind(simdjson::dom::element v, TargetKind* out) const {
    std::string_view s;
    if (!v.get_string().get(s) && s == "accelerator") *out = TargetKind::kAccelerator;
    else if (!v.get_string().get(s) && s == "cpu") *out = TargetKind::kCpu;
    else return Error("\"kind\" must be \"accelerator\" or \"cpu\"");
    return Status::Ok();
  }

  Status Bool(simdjson::dom::element v, const std::string& key, bool* out) const {
    if (v.get_bool().get(*out)) return Error("\"" + key + "\" must be true or false");
    return Status::Ok();
  }

  Status Strings(simdjson::dom::element v, const std::string& key, std::vector<std::string>* out) const {
    simdjson::dom::array arr;
    if (v.get_array().get(arr)) return Error("\"" + key + "\" must be an array of strings");
    for (auto item : arr) {
      std::string_view s;
      if (item.get_string().get(s)) return Error("\"" + key + "\" must be an array of strings");
      out->emplace_back(s);
    }
    return Status::Ok();
  }

  Status StringMap(simdjson::dom::element v, const std::string& key, std::map<std::string, std::string>* out) const {
    simdjson::dom::object obj;
    if (v.get_object().get(obj)) return Error("\"" + key + "\" must be an object of strings");
    for (auto field : obj) {
      std::string_view s;
      if (field.value.get_string().get(s))
        return Error("\"" + key + "." + std::string(field.key) + "\" must be a string");
      if (s.empty()) return Error("\"" + key + "." + std::string(field.key) + "\" is empty");
      (*out)[std::string(field.key)] = std::string(s);
    }
    return Status::Ok();
  }

  Status Renames(simdjson::dom::element v, target::Renames* out) const {
    simdjson::dom::object obj;
    if (v.get_object().get(obj)) return Error("\"renames\" must be an object");
    for (auto field : obj) {
      std::string key(field.key);
      std::map<std::string, std::string>* dest = key == "methods"                ? &out->methods
                                                 : key == "attributes"           ? &out->attributes
                                                 : key == "distributed_backends" ? &out->distributed_backends
                                                 : key == "env_vars"             ? &out->env_vars
                                                                                 : nullptr;
      if (!dest)
        return Error("unknown key \"renames." + key +
                     "\" (known: methods, attributes, distributed_backends, env_vars)");
      PORTKIT_RETURN_IF_ERROR(StringMap(field.value, "renames." + key, dest));
    }
    return Status::Ok();
  }

  Status Profile(simdjson::dom::element v, ProfileFacts* out) const {
    std::map<std::string, std::vector<std::string>> activations;
    std::map<std::string, std::pair<std::string, std::string>> replacements;
    simdjson::dom::object obj;
    if (v.get_object().get(obj)) return Error("\"profile\" must be an object");
    for (auto field : obj) {
      std::string key(field.key);
      if (key == "communication_kernels") {
        PORTKIT_RETURN_IF_ERROR(Strings(field.value, "profile." + key, &out->communication_kernels));
      } else if (key == "fusion_apis") {
        PORTKIT_RETURN_IF_ERROR(StringMap(field.value, "profile." + key, &out->fusion_apis));
      } else if (key == "native_activations") {
        PORTKIT_RETURN_IF_ERROR(Strings(field.value, "profile." + key, &out->native_activations));
      } else if (key == "non_native_ops") {
        simdjson::dom::array arr;
        if (field.value.get_array().get(arr)) return Error("\"profile.non_native_ops\" must be an array of objects");
        for (auto item : arr) {
          NonNativeOp op;
          PORTKIT_RETURN_IF_ERROR(NonNative(item, &op));
          out->non_native_ops.push_back(std::move(op));
        }
      } else if (key == "native_ops") {
        PORTKIT_RETURN_IF_ERROR(NativeOps(field.value, &activations, &replacements));
      } else {
        return Error("unknown key \"profile." + key +
                     "\" (known: communication_kernels, fusion_apis, native_activations, native_ops, non_native_ops)");
      }
    }
    ExpandNativeOps(activations, replacements, out);
    return Status::Ok();
  }

  /// profile.native_ops: {"activations": {Name: [aten ops]}, "replacements": {Name: {"replacement",
  /// "accuracy"}}}.
  Status NativeOps(simdjson::dom::element v, std::map<std::string, std::vector<std::string>>* activations,
                   std::map<std::string, std::pair<std::string, std::string>>* replacements) const {
    simdjson::dom::object obj;
    if (v.get_object().get(obj)) return Error("\"profile.native_ops\" must be an object");
    for (auto field : obj) {
      std::string key(field.key), where = "profile.native_ops." + key;
      simdjson::dom::object inner;
      if (field.value.get_object().get(inner)) return Error("\"" + where + "\" must be an object");
      if (key == "activations") {
        for (auto a : inner)
          PORTKIT_RETURN_IF_ERROR(
              Strings(a.value, where + "." + std::string(a.key), &(*activations)[std::string(a.key)]));
      } else if (key == "replacements") {
        for (auto r : inner) {
          std::string name(r.key), at = where + "." + name;
          simdjson::dom::object fix;
          if (r.value.get_object().get(fix)) return Error("\"" + at + "\" must be an object");
          auto& [replacement, accuracy] = (*replacements)[name];
          for (auto f : fix) {
            std::string k(f.key);
            if (k == "replacement") PORTKIT_RETURN_IF_ERROR(String(f.value, at + "." + k, &replacement));
            else if (k == "accuracy") PORTKIT_RETURN_IF_ERROR(String(f.value, at + "." + k, &accuracy));
            else return Error("unknown key \"" + at + "." + k + "\" (known: replacement, accuracy)");
          }
          if (replacement.empty()) return Error("\"" + at + "\" needs a \"replacement\"");
        }
      } else {
        return Error("unknown key \"" + where + "\" (known: activations, replacements)");
      }
    }
    return Status::Ok();
  }

  /// Every activation of native_ops.activations that native_activations does not list becomes a
  /// non-native op (unless non_native_ops already describes it), with its replacement and
  /// accuracy note from native_ops.replacements.
  static void ExpandNativeOps(const std::map<std::string, std::vector<std::string>>& activations,
                              const std::map<std::string, std::pair<std::string, std::string>>& replacements,
                              ProfileFacts* out) {
    auto lower = [](std::string s) {
      std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
      return s;
    };
    std::set<std::string> native, described;
    for (const auto& n : out->native_activations) native.insert(lower(n));
    for (const auto& op : out->non_native_ops) described.insert(lower(op.name));
    std::string native_list;
    for (const auto& n : out->native_activations) native_list += (native_list.empty() ? "" : ", ") + n;
    for (const auto& [name, ops] : activations) {
      if (native.count(lower(name)) || described.count(lower(name)) || ops.empty()) continue;
      NonNativeOp op;
      op.name = name;
      op.why = "not a native activation on the target (native: " + native_list + ")";
      op.ops = ops;
      auto r = replacements.find(name);
      op.replacement = r != replacements.end() ? r->second.first : "a native activation (" + native_list + ")";
      op.caveat = r != replacements.end() && !r->second.second.empty()
                      ? r->second.second
                      : "a different activation changes the model: fine-tune or retrain with it and check the accuracy";
      out->non_native_ops.push_back(std::move(op));
    }
  }

  Status NonNative(simdjson::dom::element v, NonNativeOp* out) const {
    simdjson::dom::object obj;
    if (v.get_object().get(obj)) return Error("\"profile.non_native_ops\" must be an array of objects");
    for (auto field : obj) {
      std::string key(field.key), where = "profile.non_native_ops." + key;
      std::string* text = key == "name"          ? &out->name
                          : key == "why"         ? &out->why
                          : key == "modules"     ? &out->modules
                          : key == "decomposed"  ? &out->decomposed
                          : key == "replacement" ? &out->replacement
                          : key == "caveat"      ? &out->caveat
                                                 : nullptr;
      if (text) PORTKIT_RETURN_IF_ERROR(String(field.value, where, text));
      else if (key == "ops") PORTKIT_RETURN_IF_ERROR(Strings(field.value, where, &out->ops));
      else if (key == "decomposed_backward")
        PORTKIT_RETURN_IF_ERROR(Strings(field.value, where, &out->decomposed_backward));
      else
        return Error("unknown key \"" + where +
                     "\" (known: name, why, modules, ops, decomposed, decomposed_backward, replacement, caveat)");
    }
    if (out->name.empty() || out->replacement.empty())
      return Error("each of \"profile.non_native_ops\" needs a \"name\" and a \"replacement\"");
    return Status::Ok();
  }

 private:
  std::string where_;
};

}  // namespace

std::string TargetFacts::SpellInCode(const std::string& name) const {
  const std::string& from = device_module;
  if (device_module_alias.empty() || from.empty() || name.compare(0, from.size(), from) != 0 ||
      (name.size() > from.size() && name[from.size()] != '.'))
    return name;
  return device_module_alias + name.substr(from.size());
}

std::vector<std::string> TargetFacts::DeviceMethods() const {
  std::vector<std::string> out;
  for (const auto& [cuda, method] : renames.methods) out.push_back(method);
  std::sort(out.begin(), out.end());
  return out;
}

const std::string* TargetFacts::FusedApi(std::string_view rule) const {
  auto it = fused_apis.find(std::string(rule));
  return it == fused_apis.end() ? nullptr : &it->second;
}

Expected<std::set<std::string>> LoadApiSurface(const fs::path& dir) {
  fs::path path = dir / "api_surface.tsv";
  std::set<std::string> names;
  std::error_code ec;
  if (!fs::exists(path, ec)) return names;
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path.string() + ": cannot read the API surface table");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::string name = line.substr(0, line.find('\t'));
    if (!name.empty() && name.back() == '\r') name.pop_back();
    if (!name.empty()) names.insert(std::move(name));
  }
  return names;
}

Expected<TargetFacts> LoadTargetFacts(const fs::path& dir) {
  fs::path path = dir / kFile;
  FactsReader r(path.string());
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return NotFound(path.string() + ": no such file");
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.load(path.string()).get(root))
    return r.Error(std::string("not valid JSON (") + simdjson::error_message(err) + ")");
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) return r.Error("the top level must be an object");
  TargetFacts t;
  t.dir = dir;
  std::set<std::string> seen;
  for (auto field : obj) {
    std::string key(field.key);
    seen.insert(key);
    auto v = field.value;
    if (key == "name") PORTKIT_RETURN_IF_ERROR(r.String(v, key, &t.name));
    else if (key == "description") PORTKIT_RETURN_IF_ERROR(r.String(v, key, &t.description));
    else if (key == "kind") PORTKIT_RETURN_IF_ERROR(r.Kind(v, &t.kind));
    else if (key == "default") PORTKIT_RETURN_IF_ERROR(r.Bool(v, key, &t.is_default));
    else if (key == "versions") PORTKIT_RETURN_IF_ERROR(r.Strings(v, key, &t.versions));
    else if (key == "device_type") PORTKIT_RETURN_IF_ERROR(r.String(v, key, &t.device_type));
    else if (key == "python_module") PORTKIT_RETURN_IF_ERROR(r.String(v, key, &t.python_module));
    else if (key == "import_line") PORTKIT_RETURN_IF_ERROR(r.String(v, key, &t.import_line));
    else if (key == "device_module") PORTKIT_RETURN_IF_ERROR(r.String(v, key, &t.device_module));
    else if (key == "device_module_alias") PORTKIT_RETURN_IF_ERROR(r.String(v, key, &t.device_module_alias));
    else if (key == "transfer_import") PORTKIT_RETURN_IF_ERROR(r.String(v, key, &t.transfer_import));
    else if (key == "dispatch_key") PORTKIT_RETURN_IF_ERROR(r.String(v, key, &t.dispatch_key));
    else if (key == "distributed_backends") PORTKIT_RETURN_IF_ERROR(r.Strings(v, key, &t.distributed_backends));
    else if (key == "amp_module") PORTKIT_RETURN_IF_ERROR(r.String(v, key, &t.amp_module));
    else if (key == "fp64") PORTKIT_RETURN_IF_ERROR(r.String(v, key, &t.fp64));
    else if (key == "renames") PORTKIT_RETURN_IF_ERROR(r.Renames(v, &t.renames));
    else if (key == "fused_apis") PORTKIT_RETURN_IF_ERROR(r.StringMap(v, key, &t.fused_apis));
    else if (key == "fused_optimizers") PORTKIT_RETURN_IF_ERROR(r.StringMap(v, key, &t.fused_optimizers));
    else if (key == "fused_modules") PORTKIT_RETURN_IF_ERROR(r.StringMap(v, key, &t.fused_modules));
    else if (key == "library_ops") PORTKIT_RETURN_IF_ERROR(r.StringMap(v, key, &t.library_ops));
    else if (key == "profile") PORTKIT_RETURN_IF_ERROR(r.Profile(v, &t.profile));
    else
      return r.Error("unknown key \"" + key +
                     "\" (known: name, description, kind, default, versions, device_type, python_module, "
                     "import_line, device_module, device_module_alias, transfer_import, dispatch_key, "
                     "distributed_backends, amp_module, "
                     "fp64, renames, fused_apis, fused_optimizers, fused_modules, library_ops, profile)");
  }
  std::vector<std::string> missing;
  for (const char* key : kRequiredKeys)
    if (!seen.count(key)) missing.push_back(key);
  if (!missing.empty()) {
    std::string names;
    for (const auto& k : missing) names += (names.empty() ? "\"" : ", \"") + k + "\"";
    return r.Error(std::string("missing required key") + (missing.size() > 1 ? "s " : " ") + names +
                   " (docs/targets.md describes target.json)");
  }
  if (t.name.empty()) return r.Error("\"name\" is empty");
  if (t.accelerator() && t.device_type.empty())
    return r.Error("\"device_type\" is empty (the device string that replaces \"cuda\", e.g. \"npu\")");
  if (!t.python_module.empty() && t.import_line.empty())
    return r.Error("\"python_module\" is set but \"import_line\" is missing");
  if (!t.device_module_alias.empty() && t.device_module.empty())
    return r.Error("\"device_module_alias\" is set but \"device_module\" is missing");
  return t;
}

std::vector<std::string> ListTargets(const DataDirs& data) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& root : data.dirs()) {
    for (const auto& entry : fs::directory_iterator(root / "targets", ec)) {
      if (entry.is_directory(ec) && fs::is_regular_file(entry.path() / kFile, ec))
        names.insert(entry.path().filename().string());
    }
  }
  return {names.begin(), names.end()};
}

fs::path TargetDir(const DataDirs& data, const std::string& name) {
  std::error_code ec;
  for (const auto& root : data.dirs())
    if (fs::is_regular_file(root / "targets" / name / kFile, ec)) return root / "targets" / name;
  return {};
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

Expected<std::string> DefaultTargetName(const DataDirs& data) {
  std::vector<std::string> names = ListTargets(data);
  if (names.empty()) return NotFound("no targets: no folder of " + data.Describe() + " has a targets/<name>/" + kFile);
  std::vector<fs::path> defaults;
  std::string name;
  for (const auto& n : names) {
    fs::path dir = TargetDir(data, n);
    auto facts = LoadTargetFacts(dir);
    if (!facts.ok() || !facts->is_default) continue;
    defaults.push_back(dir / kFile);
    name = n;
  }
  if (defaults.size() > 1) {
    std::string files;
    for (size_t i = 0; i < defaults.size(); ++i)
      files += (i == 0 ? "" : i + 1 == defaults.size() ? " and " : ", ") + defaults[i].string();
    return InvalidArgument("more than one default target: " + files +
                           " each say \"default\": true; keep it in one of them, or name the target with --target");
  }
  if (!defaults.empty()) return name;
  if (names.size() == 1) return names.front();
  return InvalidArgument("no default target: none of " + JoinNames(names) +
                         " says \"default\": true in its target.json; name one with --target");
}

Expected<fs::path> ResolveTarget(const DataDirs& data, const std::string& name_or_path) {
  std::error_code ec;
  std::string name = name_or_path;
  if (name.empty()) {
    auto def = DefaultTargetName(data);
    if (!def.ok()) return def.status();
    name = *def;
  }
  std::vector<std::string> names = ListTargets(data);
  std::string available = names.empty() ? "none in " + data.Describe() : JoinNames(names);
  bool is_path = name.find('/') != std::string::npos || fs::is_directory(name, ec);
  if (std::find(names.begin(), names.end(), name) != names.end() && name.find('/') == std::string::npos)
    return TargetDir(data, name);
  if (is_path) {
    fs::path dir(name);
    if (!fs::is_regular_file(dir / kFile, ec))
      return NotFound("target folder " + name + " has no " + kFile + " (available targets: " + available + ")");
    return dir;
  }
  return NotFound("unknown target '" + name + "'; available targets: " + available +
                  " (or the path of a folder holding a " + kFile + ")");
}

Expected<TargetFacts> LoadTarget(const DataDirs& data, const std::string& name_or_path) {
  auto dir = ResolveTarget(data, name_or_path);
  if (!dir.ok()) return dir.status();
  return LoadTargetFacts(*dir);
}

std::vector<std::string> MigrateTargets(const DataDirs& data) {
  std::vector<std::string> out;
  for (const auto& n : ListTargets(data)) {
    auto facts = LoadTargetFacts(TargetDir(data, n));
    if (facts.ok() && facts->migratable()) out.push_back(n);
  }
  return out;
}

std::string CheckTargetChoice(const DataDirs& data, const std::string& value, bool for_migrate) {
  auto facts = LoadTarget(data, value);
  if (!facts.ok()) return facts.status().message();
  if (for_migrate && !facts->migratable())
    return "target '" + facts->name +
           "' is not an accelerator (\"kind\": \"cpu\"), so there is nothing to migrate to; "
           "targets for migrate: " +
           JoinNames(MigrateTargets(data));
  return {};
}

std::string TargetOptionHelp(const DataDirs& data, bool for_migrate) {
  std::vector<std::string> names = for_migrate ? MigrateTargets(data) : ListTargets(data);
  std::string help = "target platform: " + (names.empty() ? std::string("none installed") : JoinNames(names));
  if (auto def = DefaultTargetName(data); def.ok()) help += " (default " + *def + ")";
  return help + ", or the path of a folder holding a target.json";
}

}  // namespace portkit::target
