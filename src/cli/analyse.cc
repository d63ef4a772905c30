#include "cli/analyse.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <optional>

#include "analyse/api.h"
#include "analyse/rule_docs.h"
#include "analyse/target.h"
#include "cli/analyse_config.h"
#include "cli/cli_common.h"
#include "core/input_files.h"
#include "render/analyse_report.h"
#include "target/target_facts.h"

namespace portkit::cli {
namespace {

std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    if (comma > start) out.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

/// `--fail-on` values: a category name or `any`.
std::string FailOnChoices() {
  std::string list;
  for (analyse::Category c : analyse::kAllCategories) list += std::string(analyse::CategoryName(c)) + ", ";
  return list + "any";
}

/// What is wrong with a --fail-on list (empty when nothing).
std::string FailOnError(const std::vector<std::string>& names) {
  const std::string choices = FailOnChoices();
  if (names.empty()) return "give at least one of " + choices;
  for (const auto& n : names) {
    bool known = n == "any";
    for (analyse::Category c : analyse::kAllCategories) known |= n == analyse::CategoryName(c);
    if (!known) return "unknown category '" + n + "'; use " + choices;
  }
  return {};
}

std::string JoinCommas(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

/// The `[tool.portkit]` settings of --config FILE, else of INPUT/pyproject.toml when there is one
/// (none with --no-config). Unknown keys are warned about.
Expected<AnalyseConfig> LoadConfig(const std::string& input, const std::string& config_file, bool no_config,
                                   Context& ctx) {
  namespace fs = std::filesystem;
  if (no_config) return AnalyseConfig{};
  fs::path file = config_file.empty() ? fs::path(input) / "pyproject.toml" : fs::path(config_file);
  std::error_code ec;
  if (config_file.empty() && (fs::is_symlink(file, ec) || !fs::is_regular_file(file, ec))) return AnalyseConfig{};
  if (Status st = CheckInput(file, config_file.empty() ? "config file" : "--config", PathKind::kFile); !st.ok())
    return st;
  auto config = ReadAnalyseConfig(file);
  if (!config.ok()) return config.status();
  for (const auto& w : config->warnings) ctx.logger.Warning(w);
  return config;
}

/// Findings of the categories named by --fail-on.
size_t GateCount(const analyse::AnalyseReport& report, const std::vector<std::string>& fail_on) {
  size_t n = 0;
  for (const auto& f : report.findings) {
    for (const auto& name : fail_on) {
      if (name == "any" || name == analyse::CategoryName(f.category)) {
        ++n;
        break;
      }
    }
  }
  return n;
}

/// `--explain [RULE]` (handled before the other options, which it does not need): prints the
/// rule's doc, or the list of rules. Returns nullopt when argv has no --explain.
std::optional<int> Explain(int argc, char** argv, Context& ctx) {
  std::optional<std::string> rule;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--explain") {
      rule = i + 1 < argc && argv[i + 1][0] != '-' ? std::string(argv[i + 1]) : std::string();
    } else if (a.rfind("--explain=", 0) == 0) {
      rule = std::string(a.substr(10));
    }
  }
  if (!rule) return std::nullopt;
  std::string out;
  if (rule->empty()) {
    out = "Rules (portkit analyse --explain RULE prints one; --select/--ignore RULE,... filter them):\n";
    for (const analyse::RuleDoc* d : analyse::RuleDocs())
      out += "  " + std::string(d->name) + std::string(d->name.size() < 28 ? 28 - d->name.size() : 1, ' ') + "[" +
             std::string(d->family) + "] " + analyse::RuleSummary(*d) + "\n";
  } else if (const analyse::RuleDoc* d = analyse::FindRuleDoc(*rule)) {
    out = analyse::RuleDocText(*d);
  } else {
    return Fail(ctx,
                InvalidArgument("--explain: unknown rule '" + *rule + "'; `portkit analyse --explain` lists them"));
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return kExitOk;
}

/// A --select/--ignore check: every name is a documented rule.
CLI::Validator RuleListValidator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        std::vector<std::string> names = SplitCommas(value);
        if (names.empty()) return "give at least one rule (`portkit analyse --explain` lists them)";
        for (const auto& n : names)
          if (!analyse::FindRuleDoc(n)) return "unknown rule '" + n + "' (`portkit analyse --explain` lists them)";
        return {};
      },
      "RULE[,RULE...]");
}

/// What a configuration file may set: the variables the flags parse into.
struct ConfigurableSettings {
  analyse::AnalyseOptions& opt;
  std::string& mode_name;
  std::vector<std::string>& formats;
  std::vector<std::string>& fail_on;
  std::vector<std::string>& select;
  std::vector<std::string>& ignore;
  size_t& max_mb;
};

/// Fills `out` from `config` where the command line gave no flag, checking each value as the flag's
/// own check would; a bad one is kInvalidArgument naming the file, line and key.
Status ApplyConfig(const AnalyseConfig& config, const CLI::App& app, CLI::Option& format_opt,
                   const std::vector<std::string>& mode_names, ConfigurableSettings out, Context& ctx) {
  auto bad = [&](const char* key, const std::string& why) {
    auto at = config.places.find(key);
    return InvalidArgument((at == config.places.end() ? config.file.string() : at->second) + ": tool.portkit." + key +
                           ": " + why);
  };
  auto unset = [&](const char* flag) { return app.count(flag) == 0; };
  if (config.select && unset("--select")) {
    std::string list = JoinCommas(*config.select);
    if (std::string why = RuleListValidator()(list); !why.empty()) return bad("select", why);
    out.select = *config.select;
  }
  if (config.ignore && unset("--ignore")) {
    std::string list = JoinCommas(*config.ignore);
    if (std::string why = RuleListValidator()(list); !why.empty()) return bad("ignore", why);
    out.ignore = *config.ignore;
  }
  if (config.exclude && unset("--exclude")) out.opt.exclude = *config.exclude;
  if (config.target && unset("--target")) {
    if (std::string why = target::CheckTargetChoice(ctx.data_dir, *config.target, false); !why.empty())
      return bad("target", why);
    out.opt.target = *config.target;
  }
  if (config.version && unset("--version")) out.opt.version = *config.version;
  if (config.mode && unset("--mode")) {
    if (!analyse::AnalyseModeByName(*config.mode))
      return bad("mode", "unknown mode '" + *config.mode + "'; use " + JoinCommas(mode_names));
    out.mode_name = *config.mode;
  }
  if (config.format && format_opt.count() == 0) {
    std::string list = JoinCommas(*config.format);
    if (list.empty()) return bad("format", "give at least one of csv, json, sarif");
    if (std::string why = (*format_opt.get_validator())(list); !why.empty()) return bad("format", why);
    out.formats.clear();
    for (const auto& f : *config.format)
      if (std::find(out.formats.begin(), out.formats.end(), f) == out.formats.end()) out.formats.push_back(f);
  }
  if (config.fail_on && unset("--fail-on")) {
    if (std::string why = FailOnError(*config.fail_on); !why.empty()) return bad("fail-on", why);
    out.fail_on = *config.fail_on;
  }
  if (config.env_path && unset("--env-path")) out.opt.env_paths = *config.env_path;
  if (config.max_file_mb && unset("--max-file-mb")) out.max_mb = static_cast<size_t>(*config.max_file_mb);
  return Status::Ok();
}

}  // namespace

int AnalyseCommand(int argc, char** argv, Context& ctx) {
  if (auto code = Explain(argc, argv, ctx)) return *code;
  analyse::AnalyseOptions opt;
  std::string input, output, mode_name = std::string(analyse::ModeInfo(opt.mode).name);
  std::vector<std::string> formats, fail_on;
  size_t max_mb = analyse::kDefaultMaxPythonFileBytes >> 20;

  std::string mode_help = "analysis mode:";
  std::vector<std::string> mode_names;
  for (const auto& m : analyse::AnalyseModes()) {
    mode_help += std::string(mode_names.empty() ? " " : "; ") + std::string(m.name) +
                 (mode_names.empty() ? " (default)" : "") + ": " + std::string(m.help);
    mode_names.emplace_back(m.name);
  }
  CLI::App app{"Static migration analysis of PyTorch code. Results go to <output>/<basename(input)>_analysis/.",
               "portkit analyse"};
  app.add_option("-i,--input", input, "folder of the training code or library to analyse")->required();
  app.add_option("-o,--output", output, "folder for results (created if missing)")->required();
  app.add_option("-v,--version", opt.version,
                 "torch version of the analysed code (the versions of the target's support lists; others "
                 "use the nearest list with a warning; default: newest)");
  app.add_option("-m,--mode", mode_name, mode_help)->check(CLI::IsMember(mode_names));
  app.add_option("--target", opt.target, target::TargetOptionHelp(ctx.data_dir, false))
      ->check([&ctx](const std::string& v) { return target::CheckTargetChoice(ctx.data_dir, v, false); });
  app.add_option("-e,--env-path", opt.env_paths,
                 "extra import roots (like PYTHONPATH) used to resolve names; also -env");
  app.add_option("--api-files", opt.api_files,
                 "full_unsupported_results.csv of earlier third_party runs on libraries the code "
                 "uses; their affected APIs are reported as unsupported; also -api");
  AddJobsOption(app, &ctx.jobs);
  auto* format_opt = AddFormatOption(app, &formats, {"csv", "json", "sarif"}, {"csv", "json"});
  format_opt->description(format_opt->get_description() +
                          "; -m dynamic_shape writes only its instrumented copy unless --format is given");
  app.add_option("--max-file-mb", max_mb,
                 "skip Python files larger than this (default " + std::to_string(max_mb) +
                     "; a file's parse tree takes 60-75 times its size)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  const std::string choices = FailOnChoices();
  app.add_option_function<std::string>(
         "--fail-on", [&fail_on](const std::string& v) { fail_on = SplitCommas(v); },
         "exit 1 when the run has findings of these categories, comma-separated: " + choices +
             " (reports are written first)")
      ->check(
          CLI::Validator([](std::string& value) { return FailOnError(SplitCommas(value)); }, "CATEGORY[,CATEGORY...]"));
  app.add_option_function<std::string>(
         "--select", [&opt](const std::string& v) { opt.select = SplitCommas(v); },
         "report only the findings of these rules, comma-separated (rule names: --explain)")
      ->check(RuleListValidator());
  app.add_option_function<std::string>(
         "--ignore", [&opt](const std::string& v) { opt.ignore = SplitCommas(v); },
         "drop the findings of these rules, comma-separated; one finding is dropped by a comment "
         "`# portkit: ignore[RULE]` (or `# portkit: ignore`, every rule) on its line")
      ->check(RuleListValidator());
  app.add_option("--explain",
                 "print the doc of RULE (what it finds, why it matters, an example, what to use "
                 "instead), or list the rules when no RULE is given; needs no other option")
      ->expected(0, 1)
      ->type_name("[RULE]");
  app.add_option("--exclude", opt.exclude,
                 "leave out files matching this glob, relative to the input folder; a glob matching a folder "
                 "leaves out what is below it, one without '/' also matches file names (repeatable; replaces "
                 "`exclude` of the configuration file)")
      ->type_name("GLOB");
  std::string config_file;
  bool no_config = false;
  app.add_option("--config", config_file,
                 "read the settings of [tool.portkit] from this TOML file instead of INPUT/pyproject.toml "
                 "(flags given here win over the file; docs/analyse.md)")
      ->type_name("FILE");
  app.add_flag("--no-config", no_config, "ignore INPUT/pyproject.toml")->excludes("--config");
  bool fail_on_findings = false;
  app.add_flag("--force", opt.force,
               "write into an existing <output>/<name>_analysis folder that portkit analyse did not create");
  app.add_flag("--fail-on-findings", fail_on_findings, "exit 1 when the run has any finding (--fail-on any)");
  if (auto code = Parse(app, argc, argv)) return *code;

  // The configuration file fills what the command line left unsaid, checked as the flags are.
  auto config = LoadConfig(input, config_file, no_config, ctx);
  if (!config.ok()) return Fail(ctx, config.status());
  if (Status st = ApplyConfig(*config, app, *format_opt, mode_names,
                              {opt, mode_name, formats, fail_on, opt.select, opt.ignore, max_mb}, ctx);
      !st.ok())
    return Fail(ctx, st);

  if (fail_on_findings && std::find(fail_on.begin(), fail_on.end(), "any") == fail_on.end()) fail_on.push_back("any");

  opt.mode = *analyse::AnalyseModeByName(mode_name);  // IsMember (or the check above) checked the name
  const analyse::AnalyseModeInfo& mode = analyse::ModeInfo(opt.mode);
  if (format_opt->count() == 0 && !config->format) formats = SplitCommas(mode.default_formats);
  opt.input = input;
  opt.output = output;
  opt.max_file_bytes = max_mb << 20;

  // Everything is checked before any work or any file is created.
  if (Status st = CheckInput(opt.input, "input", PathKind::kDirectory); !st.ok()) return Fail(ctx, st);
  if (Status st = CheckOutputFolder(opt.output, "output"); !st.ok()) return Fail(ctx, st);
  for (const auto& f : opt.api_files)
    if (Status st = CheckInput(f, "-api", PathKind::kFile); !st.ok()) return Fail(ctx, st);
  if (auto target = analyse::Target::Load(ctx.data_dir, opt.target, opt.version, nullptr); !target.ok())
    return Fail(ctx, target.status());

  auto report = analyse::RunAnalyse(opt, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  auto table = render::WriteAnalyseReports(*report, formats, ctx.logger);
  if (!table.ok()) return Fail(ctx, table.status());
  // The run is complete, its reports written: the marker no longer says it is in progress.
  if (Status st = MarkOutput(report->results_dir, "analyse", report->copy.files); !st.ok()) return Fail(ctx, st);
  std::fwrite(table->data(), 1, table->size(), stdout);
  std::fflush(stdout);
  if (size_t n = fail_on.empty() ? 0 : GateCount(*report, fail_on); n > 0) {
    std::string names;
    for (const auto& f : fail_on) names += (names.empty() ? "" : ",") + f;
    ctx.logger.Error("findings gate: " + std::to_string(n) + " finding" + (n == 1 ? "" : "s") + " of --fail-on " +
                     names + " (see the reports in " + report->results_dir.string() + ")");
    return kExitFindings;
  }
  return kExitOk;
}

}  // namespace portkit::cli
