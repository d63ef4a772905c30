// `portkit extract -i DUMP -o NEW -s NAME...`: argv → ExtractOptions → RunExtract → log (and JSON).
#include <cstdio>

#include "accuracy/api.h"
#include "cli/accuracy_commands.h"
#include "cli/cli_common.h"
#include "render/dump_tools_render.h"

namespace portkit::cli {

int ExtractCommand(int argc, char** argv, Context& ctx) {
  std::string in, out, format = "text";
  std::vector<std::string> names;
  CLI::App app{
      "Copy the named operators of a dump into a new dump (h5copy for HDF5 dumps). For an HDF5 dump, "
      "-s takes /op_name or /op_name/seqid (exact; the new .h5 holds just those groups). Exit status: 0 "
      "done, 2 bad usage or input or output, including a selected name that is not in the input (the "
      "others are still extracted).",
      "portkit extract"};
  app.add_option("-i,--input", in, "the dump folder, or an HDF5 dump (.h5)")->required();
  app.add_option("-o,--output", out, "the new dump folder, or the new .h5 file")->required();
  app.add_option("-s,--select", names,
                 "operator names (an op is kept when its name contains one) or indices; for HDF5: /op_name or "
                 "/op_name/seqid")
      ->required();
  std::vector<std::string> destinations;
  app.add_option("-d,--destination", destinations,
                 "HDF5 only, as h5copy's -d: where each -s object goes in the output (one per -s; default: the "
                 "same path), e.g. -s /op/3/ -d /op/3/");
  bool force = false;
  app.add_flag("--force", force,
               "replace an existing -o (a non-empty folder or an existing .h5 file; without it an existing .h5 "
               "output is appended to, as repeated h5copy runs do)");
  app.add_option("--format", format, "text (log lines only) or json (also a JSON summary on stdout)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  if (auto rc = Parse(app, argc, argv)) return *rc;
  if (Status st = CheckInput(in, "-i"); !st.ok()) return Fail(ctx, st);
  bool hdf5 = accuracy::IsHdf5Input(in);
  if (Status st = hdf5 ? CheckOutputFile(out, "-o") : CheckOutputFolder(out, "-o"); !st.ok()) return Fail(ctx, st);

  accuracy::ExtractOptions options{in, out, names, force, destinations};
  auto report = accuracy::RunExtract(options, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  for (const auto& w : report->warnings) ctx.logger.Warning(w);
  for (const auto& c : report->covered) ctx.logger.Warning(c + " is already inside another selected operator");
  for (const auto& m : report->missing)
    ctx.logger.Error(in + (hdf5 ? ": no operator or seqid " : ": no operator matches ") + m);
  if (format == "json") {
    std::string json = render::ExtractJson(*report);
    std::fwrite(json.data(), 1, json.size(), stdout);
  }
  if (report->missing.empty()) return kExitOk;
  return Fail(ctx, InvalidArgument(std::to_string(report->missing.size()) + " of the selected names are not in " + in +
                                   "; the others were extracted into " + out));
}

}  // namespace portkit::cli
