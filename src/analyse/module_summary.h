#pragma once
/// Pass 1 of the analysis: the top-level bindings of one module (imports, functions, classes,
/// simple assignments, `__all__`, star imports), cheap to extract and enough to resolve names
/// across modules of the project before any file is analysed in depth.
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyse/python_syntax.h"
#include "analyse/value.h"

namespace portkit::analyse {

struct TopBinding {
  enum class Kind : uint8_t {
    kImportModule,  ///< `import a.b` (binds a → module a) or `import a.b as c` (c → a.b)
    kImportFrom,    ///< `from [.]m import x [as y]`
    kFunction,
    kClass,
    kAssignCall,    ///< `x = callee(...)`: `dotted` is the callee
    kAssignDotted,  ///< `x = a.b.c`
    kOther,
  } kind = Kind::kOther;
  std::string module;  ///< imported module as written (without leading dots)
  int level = 0;       ///< leading dots of a relative import
  std::string attr;    ///< kImportFrom: imported name
  std::string dotted;  ///< kAssign*: expression text
  size_t class_index = 0;
};

struct ModuleSummary {
  std::string module_name;  ///< canonical dotted module name
  bool is_package = false;  ///< an __init__.py
  std::unordered_map<std::string, TopBinding> names;
  std::vector<std::pair<std::string, int>> star_imports;  ///< module as written, level
  std::optional<std::vector<std::string>> all;
  std::vector<std::unique_ptr<ClassInfo>> classes;
};

/// Extracts the summary of a parsed module.
ModuleSummary SummariseModule(const PySyntax& syn, const ParsedSource& src, std::string module_name, bool is_package);

/// `a.b.c` text of an identifier/attribute chain, or empty for anything else.
std::string DottedText(const PySyntax& syn, TSNode n, std::string_view src);

/// Absolute module name of a relative import written in `from_module` (a package when
/// `from_is_package`). Returns empty when the dots climb above the top level.
std::string ResolveRelativeModule(const std::string& from_module, bool from_is_package, int level,
                                  const std::string& module);

}  // namespace portkit::analyse
