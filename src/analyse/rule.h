#pragma once
/// Rules of the analyser. A rule is one file under rules/<family>/ that declares the syntax events
/// it handles and reports Findings; registering it is one line in that family's registry.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analyse/finding.h"
#include "analyse/python_syntax.h"
#include "analyse/value.h"

namespace portkit::analyse {

class Target;
struct CustomOpTable;

struct Argument {
  std::string_view keyword;  ///< empty for a positional argument
  TSNode value;
  Value type;
  bool splat = false;        ///< *args or **kwargs
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

  size_t positional_count() const {
    size_t n = 0;
    for (const auto& a : args) n += a.keyword.empty() && !a.splat;
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

/// An outermost attribute chain that resolves to an external name and is not called
/// (`torch.backends.cudnn.benchmark = True`, `dtype=torch.float16`).
struct AttributeEvent {
  TSNode node;
  std::string qname;
};

/// A plain string literal.
struct StringEvent {
  TSNode node;
  std::string value;
};

/// What a rule sees of the file being analysed, and where it reports.
class RuleContext {
 public:
  RuleContext(const PySyntax& syn, std::string_view source, std::string file, const Target& target,
              const CustomOpTable& custom_ops, std::vector<Finding>& out)
      : syntax(syn), source(source), file(std::move(file)), target(target),
        custom_ops(custom_ops), out_(out) {}

  const PySyntax& syntax;
  std::string_view source;
  std::string file;
  const Target& target;
  const CustomOpTable& custom_ops;

  void Report(TSNode node, std::string op, std::string tip, Category category,
              Confidence confidence, std::string_view rule);
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
};

/// Project-wide rules run once after every file (global advice).
class ProjectRule {
 public:
  virtual ~ProjectRule() = default;
  virtual std::string_view name() const = 0;
  /// `findings` holds every per-file finding; `called` every qualified name called anywhere,
  /// `strings` every string literal seen.
  virtual void Finish(const std::vector<Finding>& findings,
                      const std::vector<std::string>& called, const Target& target,
                      std::vector<Finding>& out) = 0;
};

}  // namespace portkit::analyse
