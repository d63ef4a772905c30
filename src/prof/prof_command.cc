#include "prof/prof_command.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/csv_writer.h"
#include "core/json_writer.h"
#include "core/table.h"
#include "prof/exporters/summary.h"
#include "prof/advisor/advisor.h"
#include "prof/diff.h"
#include "prof/exporters/timeline.h"
#include "prof/importers/chrome_trace.h"
#include "prof/importers/kernel_details.h"
#include "prof/store.h"

namespace portkit::prof {
namespace fs = std::filesystem;
namespace {

bool LooksLikeTraceName(const fs::path& p) {
  std::string name = p.filename().string();
  auto ends = [&](const char* s) {
    size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  return ends(".json") || ends(".json.gz") || name == "kernel_details.csv";
}

/// Trace files under `path` (itself when it is a file), sorted; our own outputs are skipped.
std::vector<fs::path> FindTraces(const fs::path& path) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path};
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const auto& p = it->path();
    std::string dir = p.parent_path().filename().string();
    if (it->is_directory() && (dir == "timeline" || dir == "summary")) continue;
    if (it->is_regular_file() && LooksLikeTraceName(p) && dir != "timeline" && dir != "summary")
      out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int Import(const std::string& dir, Context& ctx) {
  Logger& log = ctx.logger;
  fs::path path(dir);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    log.Error("-dir " + dir + " does not exist; give a PROF_<timestamp> folder, a folder of traces or a trace file");
    return 2;
  }
  fs::path folder = fs::is_directory(path, ec) ? path : path.parent_path();
  std::vector<fs::path> traces;
  for (const auto& t : FindTraces(path))
    if (t.filename() == "kernel_details.csv" ? SniffKernelDetails(t.string()) : SniffChromeTrace(t.string()))
      traces.push_back(t);
  if (traces.empty()) {
    log.Error("no trace found under " + dir + " (looked for Kineto/Chrome-trace *.json, *.json.gz and "
              "torch_npu kernel_details.csv)");
    return 2;
  }
  fs::path db_path = folder / "portkit.db";
  auto store = Store::Open(db_path.string());
  if (!store.ok()) {
    log.Error(store.status().message());
    return 2;
  }
  std::vector<std::vector<std::string>> rows;
  int rc = 0;
  Progress progress(log, traces.size());
  for (const auto& t : traces) {
    std::string display = fs::relative(t, folder, ec).string();
    if (ec || display.empty()) display = t.filename().string();
    progress.Start("Import " + display + ".");
    auto start = std::chrono::steady_clock::now();
    auto result = t.filename() == "kernel_details.csv" ? ImportKernelDetails(t.string(), display, *store)
                                                       : ImportChromeTrace(t.string(), display, *store);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result.ok()) {
      log.Error(result.status().message());
      rows.push_back({display, "-", "-", "-", "error"});
      rc = 1;
      progress.Done("Import " + display + " failed.");
      continue;
    }
    if (!result->warning.empty()) log.Warning(display + ": " + result->warning);
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.1f", secs > 0 ? static_cast<double>(result->bytes) / 1e6 / secs : 0.0);
    rows.push_back({display, result->format, std::to_string(result->events), std::to_string(result->skipped),
                    result->truncated ? "truncated" : "ok"});
    progress.Done("Imported " + display + ": " + std::to_string(result->events) + " events (" +
                  std::string(rate) + " MB/s).");
  }
  log.Info("Profile database: " + db_path.string());
  std::string table = RenderTable({"trace", "format", "events", "not stored", "status"}, rows);
  std::fwrite(table.data(), 1, table.size(), stdout);
  return rc;
}

/// The store of an imported profile folder; logs and returns an error when there is none.
Expected<Store> OpenImported(const std::string& dir, fs::path* folder, Logger& log) {
  *folder = fs::path(dir);
  std::error_code ec;
  if (fs::is_regular_file(*folder, ec)) *folder = folder->parent_path();
  fs::path db_path = *folder / "portkit.db";
  if (!fs::exists(db_path, ec)) {
    Status st = NotFound("no profile database in " + folder->string() + "; run `portkit prof import -dir " +
                         dir + "` first");
    log.Error(st.message());
    return st;
  }
  auto store = Store::Open(db_path.string());
  if (!store.ok()) log.Error(store.status().message());
  return store;
}

int ExportTimeline(const std::string& dir, Context& ctx) {
  Logger& log = ctx.logger;
  fs::path folder;
  auto store = OpenImported(dir, &folder, log);
  if (!store.ok()) return 2;
  TimelineStats stats;
  auto json = BuildTimeline(*store, &stats);
  if (!json.ok()) {
    log.Error(json.status().message());
    return 1;
  }
  std::error_code ec;
  fs::create_directories(folder / "timeline", ec);
  Status st = WriteFileAtomic(folder / "timeline" / "timeline.json", *json);
  if (!st.ok()) {
    log.Error(st.message());
    return 1;
  }
  if (stats.clipped)
    log.Warning(std::to_string(stats.clipped) + " events did not nest on their track and were clipped to "
                "their parent's end");
  log.Info("Wrote timeline/timeline.json: " + std::to_string(stats.events) + " events, " +
           std::to_string(stats.flows) + " launch flows, " + std::to_string(stats.clipped) + " clipped.");
  return 0;
}

std::string Ms(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e6);
  return buf;
}

std::string Pct(double base, double cmp) {
  if (base == 0) return cmp == 0 ? "0.00%" : "new";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f%%", 100.0 * (cmp - base) / base);
  return buf;
}

int Diff(const std::string& base_dir, const std::string& cmp_dir, double fail_above, bool has_gate,
         Context& ctx) {
  Logger& log = ctx.logger;
  Totals sides[2];
  fs::path folders[2];
  const std::string* dirs[2] = {&base_dir, &cmp_dir};
  for (int i = 0; i < 2; ++i) {
    std::error_code ec;
    fs::path folder = fs::is_regular_file(*dirs[i], ec) ? fs::path(*dirs[i]).parent_path() : fs::path(*dirs[i]);
    if (!fs::exists(folder / "portkit.db", ec)) {
      log.Info(folder.string() + " is not imported yet; importing it first.");
      int rc = Import(*dirs[i], ctx);
      if (rc != 0) return rc == 1 ? 1 : 2;
    }
    auto store = OpenImported(*dirs[i], &folders[i], log);
    if (!store.ok()) return 2;
    auto totals = ComputeTotals(*store);
    if (!totals.ok()) {
      log.Error(totals.status().message());
      return 1;
    }
    sides[i] = std::move(*totals);
  }
  const Totals &base = sides[0], &cmp = sides[1];
  std::printf("\nstep time: %.3f ms (%zu steps) -> %.3f ms (%zu steps): %s\n", base.step_ms, base.steps,
              cmp.step_ms, cmp.steps, Pct(base.step_ms, cmp.step_ms).c_str());
  std::error_code ec;
  fs::create_directories(folders[1] / "diff", ec);
  int rc = 0;
  for (const auto& [name, b, c] : {std::tuple<const char*, const decltype(base.ops)*, const decltype(cmp.ops)*>{
                                       "operators", &base.ops, &cmp.ops},
                                   {"kernels", &base.kernels, &cmp.kernels}}) {
    auto rows = Deltas(*b, *c);
    CsvWriter w({"Name", "Base Time(ms)", "Compare Time(ms)", "Delta(ms)", "Delta(%)"});
    std::vector<std::vector<std::string>> top;
    for (const auto& r : rows) {
      std::vector<std::string> row = {r.key, Ms(r.base_ns), Ms(r.cmp_ns), Ms(r.cmp_ns - r.base_ns),
                                      Pct(static_cast<double>(r.base_ns), static_cast<double>(r.cmp_ns))};
      w.AddRow(row);
      if (top.size() < 10) {
        row[0] = row[0].size() > 60 ? row[0].substr(0, 57) + "..." : row[0];
        top.push_back(row);
      }
    }
    Status st = WriteFileAtomic(folders[1] / "diff" / (std::string("diff_") + name + ".csv"), w.str());
    if (!st.ok()) log.Error(st.message()), rc = 1;
    if (!top.empty()) {
      std::printf("\ntop %s by |delta| (all in diff/diff_%s.csv):\n", name, name);
      std::string t = RenderTable({name, "base ms", "compare ms", "delta ms", "delta"}, top);
      std::fwrite(t.data(), 1, t.size(), stdout);
    }
  }
  if (has_gate && base.step_ms > 0) {
    double change = 100.0 * (cmp.step_ms - base.step_ms) / base.step_ms;
    if (change > fail_above) {
      char limit[32];
      std::snprintf(limit, sizeof limit, "%.2f%%", fail_above);
      log.Error("step time regressed by " + Pct(base.step_ms, cmp.step_ms) + ", more than --fail-above " + limit);
      return 3;
    }
  }
  return rc;
}

/// Splits a shell-like command line on spaces, honouring single and double quotes.
std::vector<std::string> SplitCommand(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  bool any = false;
  for (char c : line) {
    if (quote) {
      if (c == quote) quote = 0;
      else cur.push_back(c);
    } else if (c == '\'' || c == '"') {
      quote = c;
      any = true;
    } else if (c == ' ' || c == '\t') {
      if (any || !cur.empty()) out.push_back(cur), cur.clear(), any = false;
    } else {
      cur.push_back(c);
    }
  }
  if (any || !cur.empty()) out.push_back(cur);
  return out;
}

struct CollectOptions {
  std::string output, application;
  int steps = 0;
  bool record_shapes = false, with_stack = false;
  std::vector<std::string> command;
};

int Collect(CollectOptions opt, Context& ctx) {
  Logger& log = ctx.logger;
  if (!opt.application.empty()) opt.command = SplitCommand(opt.application);
  if (opt.command.empty()) {
    log.Error("no program to profile: give it after -- (portkit prof collect --output=DIR -- python train.py) "
              "or as --application=\"python train.py\"");
    return 2;
  }
  std::string exe = fs::path(opt.command[0]).filename().string();
  if (exe.rfind("python", 0) != 0) {
    log.Error("the command must start with a Python interpreter (python, python3, /usr/bin/python3 ...); got '" +
              opt.command[0] + "'");
    return 2;
  }
  // Interpreter options before the script (-u, -X ...) stay in front of the launcher.
  std::vector<std::string> argv = {opt.command[0]};
  size_t i = 1;
  while (i < opt.command.size() && opt.command[i].size() > 1 && opt.command[i][0] == '-' && opt.command[i] != "-m") {
    argv.push_back(opt.command[i]);
    if ((opt.command[i] == "-X" || opt.command[i] == "-W") && i + 1 < opt.command.size()) argv.push_back(opt.command[++i]);
    ++i;
  }
  if (i >= opt.command.size()) {
    log.Error("no script or -m module in the command");
    return 2;
  }
  argv.push_back("-m");
  argv.push_back("portkit.prof_launch");
  for (; i < opt.command.size(); ++i) argv.push_back(opt.command[i]);

  std::time_t now = std::chrono::system_clock::to_time_t(ctx.clock());
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", &tm);
  fs::path prof_dir = fs::absolute(opt.output) / (std::string("PROF_") + stamp + "_" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(prof_dir, ec);
  if (ec) {
    log.Error("cannot create " + prof_dir.string() + ": " + ec.message());
    return 2;
  }
  fs::path python_dir = FindPythonDir();  // empty: the interpreter's own (pip-installed) portkit
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("PYTHONPATH=", 0) == 0 || kv.rfind("PORTKIT_PROF_", 0) == 0) continue;
    env.push_back(kv);
  }
  const char* old_path = std::getenv("PYTHONPATH");
  std::string pythonpath = python_dir.string();
  if (old_path && *old_path) pythonpath += (pythonpath.empty() ? "" : ":") + std::string(old_path);
  if (!pythonpath.empty()) env.push_back("PYTHONPATH=" + pythonpath);
  env.push_back("PORTKIT_PROF_OUT=" + prof_dir.string());
  env.push_back("PORTKIT_PROF_STEPS=" + std::to_string(opt.steps));
  env.push_back(std::string("PORTKIT_PROF_RECORD_SHAPES=") + (opt.record_shapes ? "1" : "0"));
  env.push_back(std::string("PORTKIT_PROF_WITH_STACK=") + (opt.with_stack ? "1" : "0"));
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::string shown;
  for (const auto& a : argv) shown += (shown.empty() ? "" : " ") + a;
  log.Info("Profiling: " + shown);
  pid_t pid = 0;
  int err = posix_spawnp(&pid, cargv[0], nullptr, nullptr, cargv.data(), cenv.data());
  if (err != 0) {
    log.Error("cannot start " + argv[0] + ": " + std::strerror(err));
    return 2;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int child_rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  size_t traces = 0;
  for (const auto& e : fs::directory_iterator(prof_dir, ec)) traces += LooksLikeTraceName(e.path());
  if (child_rc != 0) log.Warning("the program exited with status " + std::to_string(child_rc));
  if (traces == 0) {
    log.Error("no trace was written to " + prof_dir.string());
    return child_rc ? child_rc : 1;
  }
  log.Info("Raw trace(s) in " + prof_dir.string() + "; next: portkit prof import -dir " + prof_dir.string());
  std::printf("%s\n", prof_dir.string().c_str());
  return child_rc;
}

int Analyse(const std::string& dir, Context& ctx) {
  Logger& log = ctx.logger;
  fs::path folder;
  auto store = OpenImported(dir, &folder, log);
  if (!store.ok()) return 2;
  auto profile = Profile::Load(*store, ctx.data_dir);
  if (!profile.ok()) {
    log.Error(profile.status().message());
    return 1;
  }
  std::vector<AdvisorFinding> findings;
  for (const auto& rule : MakeAdvisorRules()) rule->Check(*profile, findings);
  std::stable_sort(findings.begin(), findings.end(),
                   [](const AdvisorFinding& a, const AdvisorFinding& b) { return a.severity < b.severity; });
  Breakdown b = ComputeBreakdown(*profile);
  std::string text = AdvisorText(*profile, b, findings);
  std::error_code ec;
  fs::create_directories(folder / "analysis", ec);
  Status st = WriteFileAtomic(folder / "analysis" / "advisor.txt", text);
  if (st.ok()) st = WriteFileAtomic(folder / "analysis" / "advisor.html", AdvisorHtml(*profile, b, findings));
  if (!st.ok()) {
    log.Error(st.message());
    return 1;
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  log.Info("Advisor report: " + (folder / "analysis" / "advisor.txt").string() + " and advisor.html");
  return 0;
}

int ExportSummary(const std::string& dir, const std::string& format, Context& ctx) {
  Logger& log = ctx.logger;
  fs::path folder;
  std::error_code ec;
  auto store = OpenImported(dir, &folder, log);
  if (!store.ok()) return 2;
  auto tables = BuildSummaries(*store);
  if (!tables.ok()) {
    log.Error(tables.status().message());
    return 1;
  }
  fs::path out = folder / "summary";
  fs::create_directories(out, ec);
  if (ec) {
    log.Error("cannot create " + out.string() + ": " + ec.message());
    return 2;
  }
  std::vector<std::vector<std::string>> rows;
  int rc = 0;
  for (const auto& t : *tables) {
    std::string content;
    if (format == "csv") {
      CsvWriter w(t.header);
      for (const auto& r : t.rows) w.AddRow(r);
      content = w.str();
    } else {
      JsonWriter j;
      j.BeginArray();
      for (const auto& r : t.rows) {
        j.BeginObject();
        for (size_t i = 0; i < t.header.size(); ++i) j.Key(t.header[i]).String(r[i]);
        j.EndObject();
      }
      j.EndArray();
      content = j.str();
    }
    std::string name = t.name + "." + format;
    Status st = WriteFileAtomic(out / name, content);
    if (!st.ok()) {
      log.Error(st.message());
      rc = 1;
      continue;
    }
    rows.push_back({"summary/" + name, std::to_string(t.rows.size())});
  }
  std::string table = RenderTable({"files", "rows"}, rows);
  std::fwrite(table.data(), 1, table.size(), stdout);
  return rc;
}

}  // namespace

int ProfMain(int argc, char** argv, Context& ctx) {
  CLI::App app{"Profiles of PyTorch programs (seed 003): import traces into a SQLite store.",
               "portkit prof"};
  app.require_subcommand(1);
  std::string dir;
  auto* import = app.add_subcommand(
      "import", "import Kineto JSON(.gz), legacy torch profiler JSON and torch_npu trace_view.json "
                "into <dir>/portkit.db");
  import->add_option("-d,--dir", dir, "a PROF_<timestamp> folder, any folder of traces (searched "
                                      "recursively) or one trace file; also -dir")
      ->required();
  auto* exp = app.add_subcommand("export", "export an imported profile");
  exp->require_subcommand(1);
  std::string summary_dir, format = "csv";
  auto* summary = exp->add_subcommand(
      "summary", "op_summary, op_statistic, api_statistic, kernel_statistic, step_trace into <dir>/summary/");
  summary->add_option("-d,--dir", summary_dir, "the profile folder (holding portkit.db); also -dir")->required();
  summary->add_option("--format", format, "csv (default) or json")->check(CLI::IsMember({"csv", "json"}));
  std::string timeline_dir;
  auto* timeline = exp->add_subcommand("timeline", "Chrome-trace JSON (Perfetto) into <dir>/timeline/timeline.json");
  timeline->add_option("-d,--dir", timeline_dir, "the profile folder (holding portkit.db); also -dir")->required();
  std::string analyse_dir;
  auto* analyse = app.add_subcommand("analyse", "advisor: time split, top operators and kernels, and rules with "
                                                "severity, evidence and advice (text and HTML in <dir>/analysis/)");
  analyse->add_option("-d,--dir", analyse_dir, "the profile folder; also -dir")->required();
  CollectOptions collect_opt;
  auto* collect = app.add_subcommand(
      "collect", "run a Python program under the PyTorch profiler (no code changes) and write the raw "
                 "trace into DIR/PROF_<timestamp>/");
  collect->add_option("--output", collect_opt.output, "folder for the PROF_<timestamp> folder")->required();
  collect->add_option("--steps", collect_opt.steps,
                      "record this many steps (optimizer.step() calls) after a warm-up step; default: whole run");
  collect->add_flag("--record-shapes", collect_opt.record_shapes, "record operator input shapes");
  collect->add_flag("--with-stack", collect_opt.with_stack, "record Python stacks");
  collect->add_option("--application", collect_opt.application, "the command as one string (seed spelling)");
  collect->add_option("command", collect_opt.command, "the command, after --");
  std::string base_dir, cmp_dir;
  double fail_above = 0;
  auto* diff = app.add_subcommand("diff", "compare two profiles: step time and per-operator / per-kernel deltas "
                                          "(CSV into CMP_DIR/diff/); exit 3 when --fail-above is exceeded");
  diff->add_option("base", base_dir, "the base profile folder (imported first if needed)")->required();
  diff->add_option("compare", cmp_dir, "the profile to compare with it")->required();
  auto* gate = diff->add_option("--fail-above", fail_above,
                                "exit 3 when the step time grows by more than this percentage");
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    args.push_back(a == "-dir" ? "--dir" : a);
  }
  std::vector<const char*> cargv;
  for (auto& a : args) cargv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(cargv.size()), const_cast<char**>(cargv.data()));
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (import->parsed()) return Import(dir, ctx);
  if (collect->parsed()) return Collect(collect_opt, ctx);
  if (analyse->parsed()) return Analyse(analyse_dir, ctx);
  if (summary->parsed()) return ExportSummary(summary_dir, format, ctx);
  if (timeline->parsed()) return ExportTimeline(timeline_dir, ctx);
  if (diff->parsed()) return Diff(base_dir, cmp_dir, fail_above, gate->count() > 0, ctx);
  return 2;
}

}  // namespace portkit::prof
