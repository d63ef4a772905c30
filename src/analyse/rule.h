#pragma once
/// Rules of the analyser. A rule is one file under rules/<family>/ that declares the syntax events
/// it handles and reports Findings; registering it is one line in that family's registry.
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "analyse/finding.h"
#include "analyse/python_syntax.h"
#include "analyse/value.h"

namespace portkit::analyse {

class Target;
struct CustomOpTable;
class ThirdPartyApis;
struct AffinityTable;

/// The data a run hands its rules; pointers may be null when a mode does not need them.
struct RuleData {
  const Target* target = nullptr;
  const CustomOpTable* custom_ops = nullptr;
  const ThirdPartyApis* third_party = nullptr;  ///< -api results of earlier third_party runs
  const AffinityTable* affinity = nullptr;
  /// Names whose use project rules ask about (FileAnalysis::seen records only these).
  const std::unordered_set<std::string>* watched_names = nullptr;
};

struct Argument {
  std::string_view keyword;  ///< empty for a positional argument
  TSNode value;
  Value type;
  bool splat = false;  ///< *args or **kwargs
};

/// A call `callee(args)` with its callee resolved.
struct CallEvent {
  TSNode node;
  Value callee;
  /// Names to look up in support tables, most specific first (see LookupNames).
  std::vector<std::string> lookup;
  /// When the callee is `obj.method`: the method name, and whether obj's type is unknown.
  std::string_view method;
  bool receiver_unknown = false;
  std::vector<Argument> args;

  /// The receiver is `super()` (a method of a base class, never an extension module).
  bool super_receiver = false;

  size_t positional_count() const {
    size_t n = 0;
    for (const auto& a : args) n += a.keyword.empty() && !a.splat;
    return n;
  }
  size_t keyword_count() const {
    size_t n = 0;
    for (const auto& a : args) n += !a.keyword.empty();
    return n;
  }
  bool has_splat() const {
    for (const auto& a : args)
      if (a.splat) return true;
    return false;
  }
  const Argument* Keyword(std::string_view name) const {
    for (const auto& a : args)
      if (a.keyword == name) return &a;
    return nullptr;
  }
  const Argument* Positional(size_t index) const {
    size_t n = 0;
    for (const auto& a : args) {
      if (!a.keyword.empty() || a.splat) continue;
      if (n++ == index) return &a;
    }
    return nullptr;
  }
};

/// A reference that is not called: an outermost attribute chain or a name that resolves to an
/// external name (`dtype=torch.float16`, `CUDA_HOME`), an attribute store
/// (`torch.backends.cudnn.benchmark = True`), or an attribute of an object that is not an external
/// name (`x.is_cuda`: `qname` empty, `attr` set).
struct AttributeEvent {
  TSNode node;
  std::string qname;      ///< the external qualified name; empty for a member of another value
  std::string_view attr;  ///< the last name (`is_cuda`); empty for a plain external read
  bool store = false;     ///< the target of an assignment
  /// Only tested against or used as a key (`isinstance(m, nn.X)`, `{nn.X: f}`, `type(m) is
  /// nn.X`, an annotation): not a use of the API.
  bool type_test = false;
};

/// A string literal; `formatted`: an f-string or a `"...".format(...)` receiver, whose
/// interpolations are `{}` in `value` (`f"cuda:{k}"` → `cuda:{}`).
struct StringEvent {
  TSNode node;
  std::string value;
  bool formatted = false;
};

/// What a rule sees of the file being analysed, and where it reports.
class RuleContext {
 public:
  RuleContext(const PySyntax& syn, std::string_view source, std::string file, const RuleData& data,
              std::vector<Finding>& out)
      : syntax(syn),
        source(source),
        file(std::move(file)),
        target(*data.target),
        custom_ops(*data.custom_ops),
        data(data),
        out_(out) {}

  const PySyntax& syntax;
  std::string_view source;
  std::string file;
  const Target& target;
  const CustomOpTable& custom_ops;
  const RuleData& data;
  /// Qualified name of the function being walked; empty at module level.
  std::string function;

  Finding& Report(TSNode node, std::string op, std::string tip, Category category, Confidence confidence,
                  std::string_view rule);
  std::string_view Text(TSNode n) const { return NodeText(n, source); }

 private:
  std::vector<Finding>& out_;
};

class Rule {
 public:
  virtual ~Rule() = default;
  virtual std::string_view name() const = 0;
  virtual void OnCall(const CallEvent&, RuleContext&) {}
  virtual void OnAttribute(const AttributeEvent&, RuleContext&) {}
  virtual void OnString(const StringEvent&, RuleContext&) {}
  /// An absolute import (EventSink::OnImport): the statement or one imported name, and the
  /// module or `module.name` it imports.
  virtual void OnImport(const AttributeEvent&, RuleContext&) {}
  /// `target[index] = value`; `base`/`index` are the values of the subscripted object and index.
  virtual void OnSubscriptAssign(TSNode /*assignment*/, TSNode /*target*/, const Value& /*base*/,
                                 const Value& /*index*/, RuleContext&) {}
};

/// Project-wide rules run once after every file (global advice).
class ProjectRule {
 public:
  virtual ~ProjectRule() = default;
  virtual std::string_view name() const = 0;
  /// `findings` holds every per-file finding; `called` every qualified name called anywhere,
  /// `strings` every string literal seen.
  virtual void Finish(const std::vector<Finding>& findings, const std::vector<std::string>& called,
                      const Target& target, std::vector<Finding>& out) = 0;
};

}  // namespace portkit::analyse
