#include "analyse/target.h"

#include <simdjson.h>

#include <cmath>
#include <cstdlib>

#include "core/atomic_file.h"
#include "core/tsv.h"

namespace portkit::analyse {
namespace fs = std::filesystem;

namespace {

Status JsonError(const fs::path& path, const char* what) { return ParseError(path.string() + ": " + what); }

Expected<std::vector<std::string>> StringArray(simdjson::ondemand::value v) {
  std::vector<std::string> out;
  simdjson::ondemand::array arr;
  if (v.get_array().get(arr)) return ParseError("expected an array of strings");
  for (auto item : arr) {
    std::string_view s;
    if (item.get_string().get(s)) return ParseError("expected a string");
    out.emplace_back(s);
  }
  return out;
}

double VersionNumber(const std::string& v) {
  int major = 0, minor = 0;
  std::sscanf(v.c_str(), "%d.%d", &major, &minor);
  return major * 1000.0 + minor;
}

// Calls fn(key, value) for each field of the JSON object in `path`; stops at fn's first error.
template <typename Fn>
Status ForEachTopLevelField(const fs::path& path, Fn fn) {
  simdjson::padded_string json;
  if (simdjson::padded_string::load(path.string()).get(json)) return IoError(path.string() + ": cannot read");
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  if (parser.iterate(json).get(doc)) return JsonError(path, "not valid JSON");
  simdjson::ondemand::object root;
  if (doc.get_object().get(root)) return JsonError(path, "top level must be an object");
  for (auto field : root) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return JsonError(path, "bad key");
    PORTKIT_RETURN_IF_ERROR(fn(key, field.value()));
  }
  return Status::Ok();
}

Status LoadAdvice(const fs::path& path, Advice* advice) {
  return ForEachTopLevelField(path, [&](std::string_view key, simdjson::ondemand::value section) -> Status {
    simdjson::ondemand::array arr;
    if (section.get_array().get(arr)) return JsonError(path, "each section must be an array");
    for (auto item_result : arr) {
      simdjson::ondemand::object item;
      if (item_result.get_object().get(item)) return JsonError(path, "entries must be objects");
      std::unordered_map<std::string, std::string> strings;
      std::vector<size_t> positions;
      std::vector<std::string> when_used;
      bool method = false;
      for (auto f : item) {
        std::string_view k;
        if (f.unescaped_key().get(k)) return JsonError(path, "bad key");
        simdjson::ondemand::value v = f.value();
        simdjson::ondemand::json_type type;
        if (v.type().get(type)) return JsonError(path, "bad value");
        if (type == simdjson::ondemand::json_type::string) {
          std::string_view s;
          if (v.get_string().get(s)) return JsonError(path, "bad string");
          strings[std::string(k)] = std::string(s);
        } else if (type == simdjson::ondemand::json_type::boolean) {
          bool b = false;
          if (v.get_bool().get(b)) return JsonError(path, "bad boolean");
          if (k == "method") method = b;
        } else if (type == simdjson::ondemand::json_type::array && k == "positions") {
          simdjson::ondemand::array pa;
          if (v.get_array().get(pa)) return JsonError(path, "bad positions");
          for (auto p : pa) {
            uint64_t u = 0;
            if (p.get_uint64().get(u)) return JsonError(path, "positions must be integers");
            positions.push_back(static_cast<size_t>(u));
          }
        } else if (type == simdjson::ondemand::json_type::array && k == "when_used") {
          auto list = StringArray(v);
          if (!list.ok()) return JsonError(path, "when_used must be strings");
          when_used = *list;
        }
      }
      if (key == "precision") {
        advice->precision.emplace_back(strings["api"], strings["tip"]);
      } else if (key == "performance") {
        advice->performance.emplace_back(strings["api"], strings["tip"]);
      } else if (key == "parameters") {
        ParameterRule r;
        r.api = strings["api"];
        r.method = method;
        r.parameter = strings["parameter"];
        r.positions = positions;
        r.has_expected = strings.count("expected") > 0;
        r.expected = strings["expected"];
        r.unexpected = strings["unexpected"];
        r.default_value = strings["default"];
        r.tip = strings["tip"];
        advice->parameters.push_back(std::move(r));
      } else if (key == "suggest_use") {
        advice->suggest_use.push_back({strings["api"], when_used, strings["tip"]});
      } else if (key == "global") {
        advice->global.push_back({strings["key"], strings["kind"], strings["tip"]});
      }
    }
    return Status::Ok();
  });
}

Status LoadCudaOnly(const fs::path& path, CudaOnly* cuda) {
  return ForEachTopLevelField(path, [&](std::string_view key, simdjson::ondemand::value value) -> Status {
    if (key == "device_module") {
      std::string_view s;
      if (value.get_string().get(s)) return JsonError(path, "\"device_module\" must be a string");
      cuda->device_module = std::string(s);
      return Status::Ok();
    }
    auto list = StringArray(value);
    if (!list.ok()) return JsonError(path, "values must be arrays of strings");
    if (key == "api_prefixes") cuda->api_prefixes = *list;
    else if (key == "methods") cuda->methods = *list;
    else if (key == "attributes") cuda->attributes = *list;
    else if (key == "device_types") cuda->device_types = *list;
    else if (key == "distributed_backends") cuda->distributed_backends = *list;
    else if (key == "apis") cuda->apis = *list;
    else if (key == "env_vars") cuda->env_vars = *list;
    else if (key == "library_ops") cuda->library_ops = *list;
    else if (key == "env_var_prefixes") cuda->env_var_prefixes = *list;
    else if (key == "build_strings") cuda->build_strings = *list;
    else if (key == "keyword_tokens") cuda->keyword_tokens = *list;
    else if (key == "other_runtimes") cuda->other_runtimes = *list;
    else if (key == "device_number_tokens") cuda->device_number_tokens = *list;
    else if (key == "extension_modules") cuda->extension_modules = *list;
    return Status::Ok();
  });
}

/// Renames the target implies where its target.json names none: CUDA's method and attribute
/// names with the CUDA device type replaced by the target's (`.cuda()` → `.npu()`, `.is_cuda` →
/// `.is_npu`: what torch generates for a renamed PrivateUse1 backend), and CUDA's process-group
/// backends → the target's first one.
void DeriveRenames(const CudaOnly& cuda, target::TargetFacts& facts) {
  if (!facts.migratable() || cuda.device_types.empty()) return;
  const std::string& cuda_type = cuda.device_types.front();
  auto derive = [&](const std::vector<std::string>& names, std::map<std::string, std::string>& renames) {
    if (!renames.empty()) return;
    for (const auto& n : names) {
      size_t at = n.find(cuda_type);
      // Only whole names or an `is_` style prefix: `_share_cuda_` has no counterpart.
      if (at == std::string::npos || at + cuda_type.size() != n.size() || (at > 0 && n[at - 1] != '_')) continue;
      if (at > 0 && n.find('_') != at - 1) continue;
      renames[n] = n.substr(0, at) + facts.device_type;
    }
  };
  derive(cuda.methods, facts.renames.methods);
  derive(cuda.attributes, facts.renames.attributes);
  if (facts.renames.distributed_backends.empty() && !facts.distributed_backends.empty())
    for (const auto& b : cuda.distributed_backends)
      facts.renames.distributed_backends[b] = facts.distributed_backends.front();
}

}  // namespace

Expected<Target> Target::Load(const DataDirs& data, const std::string& name, const std::string& version,
                              std::string* warning) {
  Target t;
  auto facts = target::LoadTarget(data, name);
  if (!facts.ok()) return facts.status();
  t.facts_ = std::move(*facts);
  t.name_ = t.facts_.name;
  const fs::path& dir = t.facts_.dir;
  std::error_code ec;
  // Versions: the folders torch-X.Y.
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string f = entry.path().filename().string();
    if (entry.is_directory() && f.rfind("torch-", 0) == 0) t.versions_.push_back(f.substr(6));
  }
  std::sort(t.versions_.begin(), t.versions_.end(),
            [](const std::string& a, const std::string& b) { return VersionNumber(a) < VersionNumber(b); });
  if (t.versions_.empty()) {
    t.all_supported_ = true;
  } else {
    std::string chosen = t.versions_.back();
    if (!version.empty()) {
      int major = 0, minor = 0;
      if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) < 1)
        return InvalidArgument("-v/--version '" + version + "' is not a torch version like 2.1.0");
      std::string wanted = std::to_string(major) + "." + std::to_string(minor);
      double want = VersionNumber(wanted);
      double best = 1e18;
      for (const auto& v : t.versions_) {
        double d = std::fabs(VersionNumber(v) - want);
        if (d < best) best = d, chosen = v;
      }
      if (chosen != wanted && warning) {
        *warning = "no " + t.name_ + " support list for torch " + version + "; using the nearest, torch " + chosen +
                   " (lists: ";
        for (size_t i = 0; i < t.versions_.size(); ++i) *warning += (i ? ", " : "") + t.versions_[i];
        *warning += ")";
      }
    }
    t.list_version_ = chosen;
    fs::path vdir = dir / ("torch-" + chosen);
    PORTKIT_RETURN_IF_ERROR(ReadTsv(vdir / "unsupported.tsv", &t.unsupported_));
    PORTKIT_RETURN_IF_ERROR(ReadTsv(vdir / "supported.tsv", &t.supported_));
    // Names of the other versions' lists: an API missing from this version's lists still exists.
    for (const auto& v : t.versions_) {
      if (v == chosen) continue;
      for (const char* file : {"supported.tsv", "unsupported.tsv"}) {
        std::unordered_map<std::string, std::string> rows;
        if (!ReadTsv(dir / ("torch-" + v) / file, &rows).ok()) continue;
        for (auto& [q, note] : rows)
          if (!t.Known(q)) t.other_versions_.insert(q);
      }
    }
  }
  if (fs::exists(dir / "advice.json", ec)) PORTKIT_RETURN_IF_ERROR(LoadAdvice(dir / "advice.json", &t.advice_));
  PORTKIT_RETURN_IF_ERROR(LoadCudaOnly(data.Find("cuda/cuda_only.json"), &t.cuda_));
  DeriveRenames(t.cuda_, t.facts_);
  if (fs::path libs = data.Find("cuda/cuda_libraries.tsv"); fs::exists(libs, ec)) {
    auto rows = ReadTsvRows(libs);
    if (!rows.ok()) return rows.status();
    for (auto& row : *rows) {
      if (row.size() < 2 || row[1].empty())
        return ParseError(libs.string() + ": " + row[0] + ": expected name<TAB>plain torch equivalent<TAB>keywords");
      CudaLibraryClass c{row[0], row[1] == "-" ? std::string() : row[1], {}, row.size() > 3 ? row[3] : std::string()};
      if (row.size() > 2)
        for (size_t b = 0; b < row[2].size();) {
          size_t e = row[2].find(',', b);
          if (e == std::string::npos) e = row[2].size();
          if (e > b) c.unsure_keywords.push_back(row[2].substr(b, e - b));
          b = e + 1;
        }
      t.cuda_libraries_.push_back(std::move(c));
    }
  }
  if (fs::exists(dir / "rewrites.tsv", ec)) PORTKIT_RETURN_IF_ERROR(ReadTsv(dir / "rewrites.tsv", &t.rewrites_));
  PORTKIT_RETURN_IF_ERROR(ReadTsv(data.Find("python/torch_only_methods.tsv"), &t.torch_methods_));
  PORTKIT_RETURN_IF_ERROR(ReadTsv(data.Find("python/torch_never_unknown.tsv"), &t.never_unknown_));
  return t;
}

const std::string* Target::Unsupported(const std::string& q) const {
  auto it = unsupported_.find(q);
  return it == unsupported_.end() ? nullptr : &it->second;
}

const std::string* Target::Supported(const std::string& q) const {
  auto it = supported_.find(q);
  return it == supported_.end() ? nullptr : &it->second;
}

const std::string* Target::Rewrite(const std::string& q) const {
  auto it = rewrites_.find(q);
  return it == rewrites_.end() ? nullptr : &it->second;
}

std::string Target::RewriteByPrefix(const std::string& qname) const {
  std::string prefix = qname;
  for (;;) {
    if (auto it = rewrites_.find(prefix); it != rewrites_.end()) return it->second + qname.substr(prefix.size());
    size_t dot = prefix.rfind('.');
    if (dot == std::string::npos) break;
    prefix.resize(dot);
  }
  auto under = [&](const std::string& module) {
    return !module.empty() && qname.size() > module.size() && qname.compare(0, module.size(), module) == 0 &&
           qname[module.size()] == '.';
  };
  const std::string& from = cuda_.device_module;
  if (from.empty()) return {};
  // torch.cuda.amp.X: the target's autocast / GradScaler module.
  if (std::string amp = facts_.AmpModule(); !amp.empty() && under(from + ".amp"))
    return amp + qname.substr(from.size() + 4);
  if (!facts_.device_module.empty() && under(from)) return facts_.device_module + qname.substr(from.size());
  return {};
}

bool Target::OtherRuntime(const std::string& qname) const {
  for (const auto& m : cuda_.other_runtimes)
    if (qname.compare(0, m.size(), m) == 0 && (qname.size() == m.size() || qname[m.size()] == '.')) return true;
  return false;
}

const std::string* Target::TorchOnlyMethod(const std::string& m) const {
  auto it = torch_methods_.find(m);
  return it == torch_methods_.end() ? nullptr : &it->second;
}

const std::string* Target::NeverUnknown(const std::string& qname) const {
  if (never_unknown_.empty()) return nullptr;
  std::string prefix = qname;
  for (;;) {
    if (auto it = never_unknown_.find(prefix); it != never_unknown_.end()) return &it->second;
    size_t dot = prefix.rfind('.');
    if (dot == std::string::npos) return nullptr;
    prefix.resize(dot);
  }
}

}  // namespace portkit::analyse
