#include "analyse/affinity.h"

#include <simdjson.h>

#include <map>
#include <set>

namespace portkit::analyse {
namespace {

std::vector<std::string> Strings(simdjson::ondemand::value v) {
  std::vector<std::string> out;
  simdjson::ondemand::array arr;
  if (v.get_array().get(arr)) return out;
  for (auto item : arr) {
    std::string_view s;
    if (!item.get_string().get(s)) out.emplace_back(s);
  }
  return out;
}

std::string LastComponent(const std::string& q) { return q.substr(q.rfind('.') + 1); }

}  // namespace

Expected<AffinityTable> AffinityTable::Load(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return AffinityTable{};  // a target without templates
  simdjson::padded_string json;
  if (simdjson::padded_string::load(path.string()).get(json)) return IoError(path.string() + ": cannot read");
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root;
  if (parser.iterate(json).get(doc) || doc.get_object().get(root))
    return ParseError(path.string() + ": not a JSON object");
  AffinityTable t;
  for (auto field : root) {
    std::string_view key;
    simdjson::ondemand::array arr;
    if (field.unescaped_key().get(key) || field.value().get_array().get(arr))
      return ParseError(path.string() + ": each section must be an array");
    for (auto item_result : arr) {
      simdjson::ondemand::object item;
      if (item_result.get_object().get(item)) return ParseError(path.string() + ": entries must be objects");
      std::map<std::string, std::string> s;
      std::map<std::string, std::vector<std::string>> lists;
      for (auto f : item) {
        std::string_view k;
        if (f.unescaped_key().get(k)) return ParseError(path.string() + ": bad key");
        simdjson::ondemand::value v = f.value();
        simdjson::ondemand::json_type type;
        if (v.type().get(type)) return ParseError(path.string() + ": bad value");
        if (type == simdjson::ondemand::json_type::array) {
          lists[std::string(k)] = Strings(v);
        } else {
          std::string_view sv;
          if (v.get_string().get(sv)) return ParseError(path.string() + ": '" + std::string(k) + "' must be a string");
          s[std::string(k)] = std::string(sv);
        }
      }
      if (key == "function") t.functions.push_back({s["name"], lists["parameters"], s["replacement"]});
      else if (key == "class")
        t.classes.push_back({s["name"], s["parent"], lists["init"], lists["forward"], s["replacement"]});
      else if (key == "torch") t.torch.push_back({s["api"], s["replacement"], s["requires"]});
    }
  }
  return t;
}

const AffinityTable::Torch* AffinityTable::FindTorch(const std::string& qname) const {
  for (const auto& t : torch)
    if (t.api == qname) return &t;
  return nullptr;
}

std::vector<Finding> MatchAffinityTemplates(const AffinityTable& table,
                                            const std::vector<DefinitionRecord>& definitions,
                                            const std::vector<CallRecord>& calls) {
  std::map<std::string, const DefinitionRecord*> by_qualname;
  for (const auto& d : definitions) by_qualname.emplace(d.qualname, &d);
  std::vector<Finding> out;
  auto report = [&](const std::string& file, uint32_t start, uint32_t end, const std::string& name,
                    const std::string& type, const std::string& replacement) {
    Finding f;
    f.file = file;
    f.start_line = start;
    f.end_line = end;
    f.op = name;
    f.tip = replacement;
    f.category = Category::kAffinity;
    f.api_type = type;
    f.rule = type == "function" ? "affinity_function_template" : "affinity_class_template";
    out.push_back(std::move(f));
  };
  // Functions: name and exact parameter list.
  for (const auto& d : definitions) {
    for (const auto& t : table.functions) {
      if (LastComponent(d.qualname) != t.name || d.parameters != t.parameters) continue;
      bool called = false;
      for (const auto& c : calls) {
        if (c.callee != d.qualname) continue;
        report(c.file, c.start_line, c.end_line, d.qualname, "function", t.replacement);
        called = true;
      }
      if (!called) report(d.file, d.line, d.line, d.qualname, "function", t.replacement);
    }
  }
  // Classes: name, __init__ and forward parameter lists.
  for (const auto& t : table.classes) {
    std::set<std::string> classes;
    for (const auto& d : definitions) {
      std::string cls = d.qualname.substr(0, d.qualname.rfind('.'));
      if (LastComponent(cls) == t.name) classes.insert(cls);
    }
    for (const auto& cls : classes) {
      auto init = by_qualname.find(cls + ".__init__");
      auto fwd = by_qualname.find(cls + ".forward");
      if (init == by_qualname.end() || init->second->parameters != t.init) continue;
      if (!t.forward.empty() && (fwd == by_qualname.end() || fwd->second->parameters != t.forward)) continue;
      bool used = false;
      for (const auto& c : calls) {
        if (c.class_name != cls) continue;
        report(c.file, c.start_line, c.end_line, cls, "class", t.replacement);
        used = true;
      }
      if (!used) report(init->second->file, init->second->line, init->second->line, cls, "class", t.replacement);
    }
  }
  return out;
}

}  // namespace portkit::analyse
