// `portkit prof cluster`: the command line of the cluster analysis (src/prof/cluster/cluster.h).
#include "cli/prof_cluster.h"

#include <cstdio>

#include "core/atomic_file.h"
#include "core/output_policy.h"
#include "render/prof_cluster.h"
#include "target/target_facts.h"

namespace portkit::cli {
namespace fs = std::filesystem;

void ClusterCommand::Register(CLI::App& prof, const Context& ctx) {
  command = prof.add_subcommand(
      "cluster",
      "multi-rank analysis of a folder of per-rank Kineto traces: ranks aligned on absolute time, temporal "
      "breakdown per rank and step, comm/compute overlap, slow ranks, slow links, communication matrix, step "
      "trace across ranks and a merged timeline (into <dir>/cluster_analysis_output/)");
  command->add_option("-d,--dir", dir, "the folder holding one trace per rank (searched recursively); also -dir")
      ->required();
  command->add_option("-o,--output", output, "folder for the reports (default: <dir>/cluster_analysis_output)");
  AddFormatOption(*command, &formats, {"text", "json", "html"}, {"text", "json", "html"});
  AddJobsOption(*command, &jobs);
  command->add_flag("--no-timeline", no_timeline, "do not write the merged timeline (cluster_timeline.json)");
  command->add_flag("--force", force, "replace files in -o that portkit did not write (refused otherwise)");
  command->add_flag("--include-last-step", include_last_step,
                    "keep device work launched in the last profiler step (HTA leaves it out as incomplete)");
  // Checked here, before any work: the target names its collective library's tasks.
  command->add_option("--target", target, target::TargetOptionHelp(ctx.data_dir, false))
      ->check([&ctx](const std::string& v) { return target::CheckTargetChoice(ctx.data_dir, v, false); });
}

namespace {

/// Runs the analysis and, on process 0, writes the reports; the exit code.
int RunAndWrite(const ClusterCommand& c, prof::cluster::Exchange& exchange, Context& ctx) {
  fs::path out = c.output.empty() ? fs::path(c.dir) / prof::cluster::kClusterOutputFolder : fs::path(c.output);
  const bool root = exchange.process() == 0;
  auto fail = [&](const Status& st) { return root ? Fail(ctx, st) : ExitCodeFor(st); };
  if (Status st = CheckInput(c.dir, "--dir", PathKind::kDirectory); !st.ok()) return fail(st);
  if (Status st = CheckOutputFolder(out, "--output"); !st.ok()) return fail(st);
  // A folder the user named may hold files portkit did not write (docs/safety.md, Outputs); the
  // default folder is portkit's own.
  std::vector<std::string> names = {"cluster_step_trace_time.csv", "cluster_communication.json",
                                    "cluster_communication_matrix.json"};
  for (const auto& f : c.formats)
    names.push_back(f == "text" ? "cluster_report.txt" : f == "json" ? "cluster_report.json" : "cluster_report.html");
  if (!c.no_timeline) names.push_back("cluster_timeline.json");
  if (!c.output.empty())
    if (Status st = CheckReplaceableIn(out, names, "--output", c.force); !st.ok()) return fail(st);
  prof::cluster::ClusterOptions options;
  options.dir = c.dir;
  options.timeline = !c.no_timeline;
  options.include_last_step = c.include_last_step;
  options.target = c.target;
  options.exchange = &exchange;
  auto report = prof::cluster::RunCluster(options, ctx);
  if (!report.ok()) return fail(report.status());
  if (!report->root) return kExitOk;  // process 0 writes; its exit code is shared below
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return Fail(ctx, IoError("cannot create " + out.string() + ": " + ec.message()));
  std::vector<std::pair<std::string, std::string>> files = {
      {"cluster_step_trace_time.csv", render::ClusterStepTraceCsv(*report)},
      {"cluster_communication.json", render::ClusterCommunicationJson(*report)},
      {"cluster_communication_matrix.json", render::ClusterCommunicationMatrixJson(*report)},
  };
  std::string text = render::ProfClusterText(*report);
  for (const auto& f : c.formats) {
    if (f == "text") files.emplace_back("cluster_report.txt", text);
    else if (f == "json") files.emplace_back("cluster_report.json", render::ProfClusterJson(*report));
    else files.emplace_back("cluster_report.html", render::ProfClusterHtml(*report));
  }
  if (!report->timeline_json.empty()) files.emplace_back("cluster_timeline.json", std::move(report->timeline_json));
  std::string list;
  for (const auto& [name, content] : files) {
    if (Status st = WriteFileAtomic(out / name, content); !st.ok()) return Fail(ctx, st);
    list += (list.empty() ? "" : ", ") + name;
  }
  if (Status st = RecordWritten(out, names); !st.ok()) return Fail(ctx, st);
  std::fwrite(text.data(), 1, text.size(), stdout);
  for (const auto& [file, why] : report->skipped) ctx.logger.Info("skipped " + file + ": " + why);
  ctx.logger.Info("Cluster reports in " + out.string() + ": " + list);
  return kExitOk;
}

}  // namespace

int ClusterCommand::Run(Context& ctx) const {
  if (jobs > 0) ctx.jobs = jobs;
  // Under mpirun (and built with MPI) every process reads its share of the ranks; process 0
  // analyses and writes, and every process ends with process 0's exit code.
  auto exchange = prof::cluster::MakeExchange();
  int code = RunAndWrite(*this, *exchange, ctx);
  return exchange->processes() > 1 ? exchange->Broadcast(code) : code;
}

}  // namespace portkit::cli
