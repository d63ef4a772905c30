// `portkit convert -d DUMP -out DIR`: argv → ConvertOptions → RunConvert → log (and JSON).
#include <cstdio>

#include "accuracy/api.h"
#include "cli/accuracy_commands.h"
#include "cli/cli_common.h"
#include "render/dump_tools_render.h"

namespace portkit::cli {

int ConvertCommand(int argc, char** argv, Context& ctx) {
  std::string input, out, type = "npy", format = "text";
  CLI::App app{
      "Convert dump tensors to .npy (bf16/fp8 widened to fp32) or .txt (flattened, one value a line). "
      "Reads portkit dumps (manifest.jsonl + .safetensors) and HDF5 dumps laid out /op_name/seqid/"
      "{input,output}/... (one .h5 file, or a folder: every .h5/.hdf5 file in it, each into its own "
      "subfolder). Exit status: 0 done, 2 bad usage, or an input (file or tensor) that could not be "
      "converted (the others are still written).",
      "portkit convert"};
  app.add_option("-d,--dump", input, "a dump folder, one .safetensors file, one .h5 file or a folder of .h5 files")
      ->required();
  app.add_option("--out,-O", out, "output folder; also -out")->required();
  bool force = false;
  app.add_flag("--force", force, "replace files of the names convert writes that portkit did not write");
  app.add_option("-t,--type", type, "npy (default) or txt")->check(CLI::IsMember({"npy", "txt"}));
  app.add_option("--format", format, "text (log lines only) or json (also a JSON list of what was written, on stdout)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  uint64_t max_view_elements = accuracy::ConvertOptions{}.max_view_elements;
  app.add_option("--max-view-elements", max_view_elements,
                 "an HDF5 dataset whose elements its file does not hold (chunks never written read as the fill "
                 "value) is refused past this many elements; 0 = no cap")
      ->capture_default_str();
  if (auto rc = Parse(app, argc, argv)) return *rc;
  for (Status st : {CheckInput(input, "-d"), CheckOutputFolder(out, "-out")})
    if (!st.ok()) return Fail(ctx, st);

  accuracy::ConvertOptions options{
      input, out, type == "txt" ? accuracy::ConvertType::kTxt : accuracy::ConvertType::kNpy, force, max_view_elements};
  auto report = accuracy::RunConvert(options, ctx);
  if (!report.ok()) return Fail(ctx, report.status());
  for (const auto& s : report->skipped) ctx.logger.Warning("skipped " + s);
  for (const auto& f : report->failed) ctx.logger.Error(f.message);
  if (format == "json") {
    std::string json = render::ConvertJson(*report);
    std::fwrite(json.data(), 1, json.size(), stdout);
  }
  if (report->failed.empty()) return kExitOk;
  size_t tensors = report->failed.size() - std::min(report->failed.size(), report->input_files_failed);
  return Fail(ctx, Status(report->failed.front().code,
                          std::to_string(report->input_files_failed) + " of " + std::to_string(report->input_files) +
                              " input files could not be read, " + std::to_string(tensors) +
                              " tensors could not be converted"));
}

}  // namespace portkit::cli
