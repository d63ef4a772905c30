#include "target/migrate_rules.h"

#include <simdjson.h>

#include <regex>

namespace portkit::target {
namespace fs = std::filesystem;

namespace {

class RulesReader {
 public:
  explicit RulesReader(std::string where) : where_(std::move(where)) {}

  Status Error(const std::string& what) const { return ParseError(where_ + ": " + what); }

  Status Object(simdjson::dom::element v, const std::string& what, simdjson::dom::object* out) const {
    if (v.get_object().get(*out)) return Error(what + " must be an object");
    return Status::Ok();
  }

  Status String(simdjson::dom::element v, const std::string& what, std::string* out) const {
    std::string_view s;
    if (v.get_string().get(s)) return Error(what + " must be a string");
    *out = std::string(s);
    return Status::Ok();
  }

  Status Array(simdjson::dom::element v, const std::string& what, simdjson::dom::array* out) const {
    if (v.get_array().get(*out)) return Error(what + " must be an array");
    return Status::Ok();
  }

  Status ArgRewrites(simdjson::dom::element v, std::vector<ArgRewrite>* out) const {
    simdjson::dom::array arr;
    PORTKIT_RETURN_IF_ERROR(Array(v, "\"arg_rewrites\"", &arr));
    size_t i = 0;
    for (auto item : arr) {
      std::string what = "\"arg_rewrites\"[" + std::to_string(i++) + "]";
      simdjson::dom::object obj;
      PORTKIT_RETURN_IF_ERROR(Object(item, what, &obj));
      ArgRewrite r;
      bool has_method = false;
      for (auto field : obj) {
        std::string key(field.key);
        std::string w = what + "." + key;
        if (key == "api") {
          PORTKIT_RETURN_IF_ERROR(String(field.value, w, &r.api));
        } else if (key == "method") {
          if (field.value.get_bool().get(r.method)) return Error(w + " must be true or false");
          has_method = true;
        } else if (key == "position") {
          PORTKIT_RETURN_IF_ERROR(Position(field.value, w, &r.position));
        } else if (key == "keyword") {
          PORTKIT_RETURN_IF_ERROR(String(field.value, w, &r.keyword));
        } else if (key == "new") {
          PORTKIT_RETURN_IF_ERROR(String(field.value, w, &r.replacement));
        } else if (key == "skip") {
          simdjson::dom::array skips;
          PORTKIT_RETURN_IF_ERROR(Array(field.value, w, &skips));
          for (auto s : skips) {
            std::string pattern;
            PORTKIT_RETURN_IF_ERROR(String(s, w + " entries", &pattern));
            try {
              std::regex re(pattern, std::regex::ECMAScript | std::regex::icase);
            } catch (const std::regex_error&) {
              return Error(w + ": invalid regular expression '" + pattern + "'");
            }
            r.skip.push_back(std::move(pattern));
          }
        } else if (key == "when") {
          std::string when;
          PORTKIT_RETURN_IF_ERROR(String(field.value, w, &when));
          if (when != "always" && when != "device_id") return Error(w + " must be \"always\" or \"device_id\"");
          r.always = when == "always";
        } else {
          return Error("unknown key " + w + " (known: api, method, position, keyword, new, skip, when)");
        }
      }
      if (r.api.empty()) return Error(what + " has no \"api\"");
      if ((r.position >= 0) == !r.keyword.empty())
        return Error(what + " needs exactly one of \"position\", \"keyword\"");
      if (!has_method) r.method = r.api.find('.') == std::string::npos;
      out->push_back(std::move(r));
    }
    return Status::Ok();
  }

  /// Calls `each(obj, what)` for every element of the array `v` called `name`; each must be an
  /// object (`what` names it in errors: `"name"[i]`).
  template <typename Each>
  Status ObjectsOf(simdjson::dom::element v, const std::string& name, Each each) const {
    simdjson::dom::array arr;
    PORTKIT_RETURN_IF_ERROR(Array(v, "\"" + name + "\"", &arr));
    size_t i = 0;
    for (auto item : arr) {
      std::string what = "\"" + name + "\"[" + std::to_string(i++) + "]";
      simdjson::dom::object obj;
      PORTKIT_RETURN_IF_ERROR(Object(item, what, &obj));
      PORTKIT_RETURN_IF_ERROR(each(obj, what));
    }
    return Status::Ok();
  }

  /// An argument position: an integer in [0, 1000].
  Status Position(simdjson::dom::element v, const std::string& what, int* out) const {
    int64_t p = 0;
    if (v.get_int64().get(p) || p < 0 || p > 1000) return Error(what + " must be a small integer >= 0");
    *out = static_cast<int>(p);
    return Status::Ok();
  }

  Status KeywordAdditions(simdjson::dom::element v, std::vector<KeywordAddition>* out) const {
    return ObjectsOf(v, "keyword_additions", [&](simdjson::dom::object obj, const std::string& what) -> Status {
      KeywordAddition a;
      for (auto field : obj) {
        std::string key(field.key);
        std::string w = what + "." + key;
        if (key == "when_position" || key == "position") {
          PORTKIT_RETURN_IF_ERROR(Position(field.value, w, key == "position" ? &a.position : &a.when_position));
          continue;
        }
        std::string* dest = key == "api"            ? &a.api
                            : key == "when_keyword" ? &a.when_keyword
                            : key == "keyword"      ? &a.keyword
                            : key == "value"        ? &a.value
                                                    : nullptr;
        if (!dest)
          return Error("unknown key " + w + " (known: api, when_keyword, when_position, keyword, position, value)");
        PORTKIT_RETURN_IF_ERROR(String(field.value, w, dest));
      }
      for (const auto& [name, value] :
           {std::pair<const char*, const std::string&>{"api", a.api}, {"keyword", a.keyword}, {"value", a.value}})
        if (value.empty()) return Error(what + " needs a non-empty \"" + name + "\"");
      out->push_back(std::move(a));
      return Status::Ok();
    });
  }

  Status KeptArguments(simdjson::dom::element v, std::vector<KeptArgument>* out) const {
    return ObjectsOf(v, "kept_arguments", [&](simdjson::dom::object obj, const std::string& what) -> Status {
      KeptArgument k;
      for (auto field : obj) {
        std::string key(field.key);
        std::string w = what + "." + key;
        if (key == "position") {
          PORTKIT_RETURN_IF_ERROR(Position(field.value, w, &k.position));
          continue;
        }
        std::string* dest = key == "api"       ? &k.api
                            : key == "keyword" ? &k.keyword
                            : key == "when"    ? &k.when
                            : key == "why"     ? &k.why
                                               : nullptr;
        if (!dest) return Error("unknown key " + w + " (known: api, keyword, position, when, why)");
        PORTKIT_RETURN_IF_ERROR(String(field.value, w, dest));
      }
      if (k.api.empty() || k.when.empty() || k.why.empty())
        return Error(what + " needs a non-empty \"api\", \"when\" and \"why\"");
      if (k.keyword.empty() && k.position < 0) return Error(what + " needs \"keyword\" or \"position\"");
      try {
        std::regex re(k.when, std::regex::ECMAScript);
      } catch (const std::regex_error&) {
        return Error(what + ".when: invalid regular expression '" + k.when + "'");
      }
      out->push_back(std::move(k));
      return Status::Ok();
    });
  }

  /// An array of objects whose keys are exactly `keys`, each a string; `fill(values)` gets them
  /// in the order of `keys`.
  template <typename T>
  Status Records(simdjson::dom::element v, const std::string& name, const std::vector<std::string>& keys,
                 std::vector<T>* out, T (*make)(std::vector<std::string>&)) const {
    simdjson::dom::array arr;
    PORTKIT_RETURN_IF_ERROR(Array(v, "\"" + name + "\"", &arr));
    size_t i = 0;
    std::string known;
    for (const auto& k : keys) known += (known.empty() ? "" : ", ") + k;
    for (auto item : arr) {
      std::string what = "\"" + name + "\"[" + std::to_string(i++) + "]";
      simdjson::dom::object obj;
      PORTKIT_RETURN_IF_ERROR(Object(item, what, &obj));
      std::vector<std::string> values(keys.size());
      std::vector<bool> seen(keys.size());
      for (auto field : obj) {
        std::string key(field.key);
        size_t k = 0;
        while (k < keys.size() && keys[k] != key) ++k;
        if (k == keys.size()) return Error("unknown key " + what + "." + key + " (known: " + known + ")");
        PORTKIT_RETURN_IF_ERROR(String(field.value, what + "." + key, &values[k]));
        seen[k] = true;
      }
      for (size_t k = 0; k < keys.size(); ++k)
        if (!seen[k] || values[k].empty()) return Error(what + " needs a non-empty \"" + keys[k] + "\"");
      out->push_back(make(values));
    }
    return Status::Ok();
  }

 private:
  std::string where_;
};

}  // namespace

Expected<MigrateRules> LoadMigrateRules(const fs::path& dir) {
  fs::path path = dir / "migrate_rules.json";
  MigrateRules rules;
  std::error_code ec;
  if (!fs::exists(path, ec)) return rules;
  RulesReader r(path.string());
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.load(path.string()).get(root))
    return r.Error(std::string("not valid JSON (") + simdjson::error_message(err) + ")");
  simdjson::dom::object obj;
  PORTKIT_RETURN_IF_ERROR(r.Object(root, "the top level", &obj));
  for (auto field : obj) {
    std::string key(field.key);
    if (key == "about") {
      std::string about;
      PORTKIT_RETURN_IF_ERROR(r.String(field.value, "\"about\"", &about));
    } else if (key == "arg_rewrites") {
      PORTKIT_RETURN_IF_ERROR(r.ArgRewrites(field.value, &rules.args));
    } else if (key == "keyword_rewrites") {
      PORTKIT_RETURN_IF_ERROR(r.Records<KeywordRewrite>(field.value, key, {"api", "keyword", "if_true", "expression"},
                                                        &rules.keywords, [](std::vector<std::string>& v) {
                                                          return KeywordRewrite{v[0], v[1], v[2], v[3]};
                                                        }));
    } else if (key == "keyword_additions") {
      PORTKIT_RETURN_IF_ERROR(r.KeywordAdditions(field.value, &rules.additions));
    } else if (key == "kept_arguments") {
      PORTKIT_RETURN_IF_ERROR(r.KeptArguments(field.value, &rules.kept));
    } else {
      return r.Error("unknown key \"" + key +
                     "\" (known: about, arg_rewrites, keyword_rewrites, keyword_additions, kept_arguments)");
    }
  }
  return rules;
}

}  // namespace portkit::target
