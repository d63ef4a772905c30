#pragma once
/// The argument and keyword rewrites `portkit migrate` applies for a target, read from
/// `<target dir>/migrate_rules.json` (schema in data/README.md). A target without the file has
/// none. Code reads these rules and never spells a target's names itself.
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"

namespace portkit::target {

/// One argument rewrite (the reference tool's ArgsModifyRule): the argument of `api` at
/// `position` (positional arguments only) or named `keyword` becomes `replacement`, where `$arg`
/// stands for the argument's source text; an empty replacement deletes the argument.
struct ArgRewrite {
  std::string api;      ///< qualified API, or a method name when `method`
  bool method = false;  ///< `api` is a method name matched on any receiver
  int position = -1;    ///< >= 0: the n-th positional argument
  std::string keyword;  ///< else: the keyword argument of this name
  std::string replacement;
  std::vector<std::string> skip;  ///< case-insensitive regexes: a match leaves the argument alone
  bool always = true;             ///< false: only for the reference's DEVICE_ID modes (not applied)
};

/// `api(keyword=True)` → `if_true`; `keyword=False` is removed; `keyword=<expr>` → `expression`
/// with `$value` replaced by the expression's text.
struct KeywordRewrite {
  std::string api, keyword, if_true, expression;
};

/// `api(..., when_keyword=<anything but False>)` without `keyword` gets `keyword=value`; the
/// argument may also be given positionally at `when_position` (>= 0). With neither, every call
/// of `api` without `keyword` (and without `**kwargs`) gets it. `position` (>= 0) is where
/// `keyword` itself may be given positionally: a call with more positional arguments than that
/// passes it already and gets nothing.
struct KeywordAddition {
  std::string api, when_keyword, keyword, value;
  int when_position = -1;
  int position = -1;
};

/// An argument of `api` (`keyword`, or the positional argument at `position`) whose text matches
/// the regular expression `when` keeps its CUDA spellings: migrate makes no edit inside it and
/// lists it for review with `why` (`torch.load(map_location=None if ... torch.cuda ...)`: None
/// restores tensors to the device they were saved from).
struct KeptArgument {
  std::string api, keyword;
  int position = -1;
  std::string when, why;
};

struct MigrateRules {
  std::vector<ArgRewrite> args;
  std::vector<KeywordRewrite> keywords;
  std::vector<KeywordAddition> additions;
  std::vector<KeptArgument> kept;
};

/// Reads `dir/migrate_rules.json`; an absent file gives empty rules. Errors name the file and
/// what is wrong (bad JSON, an unknown key, a value of the wrong type, an invalid `skip` regex).
Expected<MigrateRules> LoadMigrateRules(const std::filesystem::path& dir);

}  // namespace portkit::target
