#include "accuracy/tools.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "accuracy/dump.h"
#include "accuracy/hdf5_dump.h"
#include "accuracy/safetensors.h"
#include "accuracy/tensor_files.h"
#include "core/atomic_file.h"
#include "core/csv_writer.h"
#include "core/table.h"

namespace portkit::accuracy {
namespace fs = std::filesystem;
namespace {

int Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return -1;
}

std::string NpyBytes(const TensorInfo& t, const uint8_t* data, bool* widened) {
  NpyDescr(t.dtype, widened);
  std::string out = NpyHeader(t.dtype, t.shape);
  AppendNpyData(t.dtype, data, t.numel(), &out);
  return out;
}

std::string TxtBytes(const TensorInfo& t, const uint8_t* data) {
  std::string out;
  AppendTxtData(t.dtype, data, t.numel(), &out);
  return out;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Read pieces: 16 MiB of elements for .npy; 1 MiB for .txt, whose text is ~6x the binary size.
constexpr size_t kHdf5NpyChunkBytes = 16u << 20, kHdf5TxtChunkBytes = 1u << 20;

/// Converts every tensor of one HDF5 dump into `out` (see hdf5_dump.h for the layout): files
/// `{op}.{seqid}.{input|output}.{i}.{npy|txt}` plus `convert_index.csv` mapping each file to its
/// HDF5 path. Problems with single tensors are logged and counted in `*failed`; the rest goes on.
Status ConvertHdf5File(const fs::path& file, const fs::path& out, const std::string& type, Context& ctx,
                       size_t* written, size_t* widened_count, size_t* failed) {
  auto h5 = Hdf5File::Open(file);
  if (!h5.ok()) return h5.status();
  auto listing = h5->List();
  if (!listing.ok()) return listing.status();
  for (const auto& s : listing->skipped) ctx.logger.Warning("skipped " + s);
  for (const auto& e : listing->errors) ctx.logger.Error(e);
  *failed += listing->errors.size();
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return IoError(out.string() + ": cannot create: " + ec.message());
  CsvWriter index({"File", "HDF5 Path", "DType", "Shape", "Stored As"});
  std::set<std::string> names;
  for (const Hdf5Tensor& t : listing->tensors) {
    std::string name = SafeName(PrintableName(t.op)) + "." + SafeName(PrintableName(t.seqid)) + "." + t.role + "." +
                       std::to_string(t.index) + "." + type;
    if (!names.insert(name).second) {  // e.g. operators `a.b` and `a_b`: both become a_b
      ctx.logger.Error(file.string() + ": " + PrintableName(t.path) + ": not converted, " + name +
                       " was already written for another tensor");
      ++*failed;
      continue;
    }
    auto f = StreamingFile::Create(out / name);
    if (!f.ok()) return f.status();
    bool widened = false;
    NpyDescr(t.dtype, &widened);
    Status st = type == "npy" ? f->Append(NpyHeader(t.dtype, t.shape)) : Status::Ok();
    std::string piece;
    if (st.ok())
      st = h5->Read(t, type == "npy" ? kHdf5NpyChunkBytes : kHdf5TxtChunkBytes, [&](const uint8_t* data, size_t count) {
        piece.clear();
        if (type == "npy") AppendNpyData(t.dtype, data, count, &piece);
        else AppendTxtData(t.dtype, data, count, &piece);
        return f->Append(piece);
      });
    if (st.ok()) st = f->Commit();
    if (!st.ok()) {
      ctx.logger.Error(st.message());
      ++*failed;
      continue;
    }
    index.AddRow({name, PrintableName(t.path), std::string(DTypeName(t.dtype)), ShapeText(t.shape), t.stored});
    ++*written;
    *widened_count += widened && type == "npy";
  }
  return WriteFileAtomic(out / "convert_index.csv", index.str());
}

}  // namespace

int OverflowMain(int argc, char** argv, Context& ctx) {
  std::string dir;
  CLI::App app{"List the operators whose outputs overflow (inf/nan, or beyond fp16's range in fp16) in a dump, "
               "in execution order, the first one marked.", "portkit overflow"};
  app.add_option("dump", dir, "a dump folder written by portkit.torch.dumper")->required();
  if (int rc = Parse(app, argc, argv); rc >= 0) return rc;
  auto dump = Dump::Load(dir);
  if (!dump.ok()) {
    ctx.logger.Error(dump.status().message());
    return 2;
  }
  if (!dump->warning.empty()) ctx.logger.Warning(dump->warning);
  std::vector<std::vector<std::string>> rows;
  for (const auto& op : dump->ops) {
    bool over = op.overflow;
    for (const auto& t : op.tensors) {
      if (t.key.rfind("output", 0) != 0 || !t.has_stats) continue;
      if (!std::isfinite(t.max) || !std::isfinite(t.min) || (t.dtype == "F16" && std::max(std::fabs(t.max), std::fabs(t.min)) > 65504))
        over = true;
    }
    if (!over) continue;
    rows.push_back({rows.empty() ? "first" : "", std::to_string(op.index), op.name, op.phase, op.module, op.stack});
  }
  if (rows.empty()) {
    ctx.logger.Info("No overflowing operator in " + dir + " (" + std::to_string(dump->ops.size()) + " operators).");
    return 0;
  }
  std::string t = RenderTable({"", "index", "operator", "phase", "module", "stack"}, rows);
  std::fwrite(t.data(), 1, t.size(), stdout);
  ctx.logger.Info(std::to_string(rows.size()) + " overflowing operators; the first is " + rows[0][2] + " #" + rows[0][1] + ".");
  return 0;
}

int ConvertMain(int argc, char** argv, Context& ctx) {
  std::string input, out, type = "npy";
  CLI::App app{"Convert dump tensors to .npy (bf16/fp8 widened to fp32) or .txt (flattened, one value a line). "
               "Reads portkit dumps (manifest.jsonl + .safetensors) and HDF5 dumps laid out /op_name/seqid/"
               "{input,output}/... (one .h5 file, or a folder: every .h5/.hdf5 file in it, each into its own "
               "subfolder).",
               "portkit convert"};
  app.add_option("-d,--dump", input, "a dump folder, one .safetensors file, one .h5 file or a folder of .h5 files")
      ->required();
  app.add_option("--out,-O", out, "output folder; also -out")->required();
  app.add_option("-t,--type", type, "npy (default) or txt")->check(CLI::IsMember({"npy", "txt"}));
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) args.push_back(std::string(argv[i]) == "-out" ? "--out" : argv[i]);
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  if (int rc = Parse(app, static_cast<int>(cargv.size()), cargv.data()); rc >= 0) return rc;
  std::vector<std::pair<fs::path, std::string>> files;  // path, stem
  std::vector<std::pair<fs::path, fs::path>> h5_files;  // path, output folder
  std::error_code ec;
  if (fs::is_directory(input, ec)) {
    if (fs::exists(fs::path(input) / "manifest.jsonl", ec)) {
      auto dump = Dump::Load(input);
      if (!dump.ok()) {
        ctx.logger.Error(dump.status().message());
        return 2;
      }
      for (const auto& op : dump->ops)
        if (!op.file.empty())
          files.push_back({fs::path(input) / op.file, SafeName(std::to_string(op.index) + "." + op.name + "." + op.phase)});
    } else {
      for (auto it = fs::recursive_directory_iterator(input, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec) && HasHdf5Extension(it->path())) {
          fs::path rel = fs::relative(it->path(), input, ec);
          h5_files.push_back({it->path(), fs::path(out) / rel.replace_extension()});
        }
      std::sort(h5_files.begin(), h5_files.end());
      // a.h5 and a.hdf5 side by side: keep the extension in the folder names of all but the first.
      std::set<fs::path> used;
      for (auto& [path, dir] : h5_files)
        if (!used.insert(dir).second) {
          dir += path.extension();
          used.insert(dir);
        }
      if (h5_files.empty()) {
        ctx.logger.Error(input + ": neither a portkit dump (no manifest.jsonl) nor a folder with .h5 files");
        return 2;
      }
    }
  } else if (fs::exists(input, ec)) {
    if (HasHdf5Extension(input) || HasHdf5Signature(input)) h5_files.push_back({input, out});
    else files.push_back({input, fs::path(input).stem().string()});
  } else {
    ctx.logger.Error(input + " does not exist");
    return 2;
  }
  fs::create_directories(out, ec);
  size_t written = 0, widened_count = 0, failed = 0, failed_files = 0;
  for (const auto& [path, dir] : h5_files) {
    // In a child process: a corrupt file that crashes the HDF5 library fails that file only.
    uint64_t counts[8] = {};
    auto rc = RunIsolated(path, {dir}, [&, p = path, d = dir](uint64_t* shared) {
      size_t w = 0, wide = 0, bad = 0;
      Status st = ConvertHdf5File(p, d, type, ctx, &w, &wide, &bad);
      shared[0] = w;
      shared[1] = wide;
      shared[2] = bad;
      if (!st.ok()) ctx.logger.Error(st.message());
      return st.ok() ? 0 : 1;
    }, counts);
    written += counts[0];
    widened_count += counts[1];
    failed += counts[2];
    if (!rc.ok()) ctx.logger.Error(rc.status().message());
    if (!rc.ok() || *rc != 0) ++failed_files;
  }
  for (const auto& [path, stem] : files) {
    auto f = SafetensorsFile::Open(path);
    if (!f.ok()) {
      ctx.logger.Error(f.status().message());
      return 1;
    }
    for (const auto& [key, t] : f->tensors()) {
      bool widened = false;
      std::string bytes = type == "npy" ? NpyBytes(t, f->Data(t), &widened) : TxtBytes(t, f->Data(t));
      widened_count += widened;
      Status st = WriteFileAtomic(fs::path(out) / (stem + "." + key + "." + type), bytes);
      if (!st.ok()) {
        ctx.logger.Error(st.message());
        return 1;
      }
      ++written;
    }
  }
  ctx.logger.Info("Wrote " + std::to_string(written) + " ." + type + " files to " + out +
                  (widened_count ? "; " + std::to_string(widened_count) + " bf16/fp8 tensors widened to float32" : ""));
  if (failed_files || failed) {
    ctx.logger.Error(std::to_string(failed_files) + " of " + std::to_string(h5_files.size()) +
                     " HDF5 files could not be read, " + std::to_string(failed) + " tensors could not be converted");
    return 1;
  }
  return 0;
}

int ExtractMain(int argc, char** argv, Context& ctx) {
  std::string in, out;
  std::vector<std::string> names;
  CLI::App app{"Copy the named operators of a dump into a new dump (the seed's h5copy step). For an HDF5 dump, "
               "-s takes /op_name or /op_name/seqid (exact; the new .h5 holds just those groups).",
               "portkit extract"};
  app.add_option("-i,--input", in, "the dump folder, or an HDF5 dump (.h5)")->required();
  app.add_option("-o,--output", out, "the new dump folder, or the new .h5 file")->required();
  app.add_option("-s,--select", names,
                 "operator names (an op is kept when its name contains one) or indices; for HDF5: /op_name or "
                 "/op_name/seqid")
      ->required();
  if (int rc = Parse(app, argc, argv); rc >= 0) return rc;
  std::error_code ec;
  if (!fs::is_directory(in, ec) && (HasHdf5Extension(in) || HasHdf5Signature(in))) {
    // In a child process: a corrupt file that crashes the HDF5 library is an error, not a crash.
    fs::path out_dir = fs::absolute(out, ec).parent_path();
    auto rc = RunIsolated(in, {out_dir}, [&](uint64_t*) {
      auto res = ExtractHdf5(in, out, names);
      if (!res.ok()) {
        ctx.logger.Error(res.status().message());
        return 2;
      }
      for (const auto& m : res->missing) ctx.logger.Error(in + ": no operator or seqid " + m);
      for (const auto& c : res->covered) ctx.logger.Warning(c + " is already inside another selected operator");
      if (res->copied.empty()) {
        ctx.logger.Error("Nothing to extract: none of the names is in " + in + "; " + out + " not written");
        return 1;
      }
      ctx.logger.Info("Extracted " + std::to_string(res->copied.size()) + " groups into " + out);
      return res->missing.empty() ? 0 : 1;
    }, nullptr);
    if (!rc.ok()) {
      ctx.logger.Error(rc.status().message());
      return 2;
    }
    return *rc;
  }
  auto dump = Dump::Load(in);
  if (!dump.ok()) {
    ctx.logger.Error(dump.status().message());
    return 2;
  }
  fs::create_directories(out, ec);
  std::ifstream manifest(fs::path(in) / "manifest.jsonl");
  std::string line, kept;
  size_t i = 0, count = 0;
  auto is_index = [](const std::string& n) {
    return !n.empty() && std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  while (std::getline(manifest, line) && i < dump->ops.size()) {
    if (line.empty()) continue;  // as Dump::Load reads it
    const DumpOp& op = dump->ops[i++];
    bool want = false;
    // A number selects that operator index; anything else is a part of the operator name.
    for (const auto& n : names)
      want |= is_index(n) ? n == std::to_string(op.index) : op.name.find(n) != std::string::npos;
    if (!want) continue;
    kept += line + "\n";
    ++count;
    if (!op.file.empty()) {
      Status st = CopyFileAtomic(fs::path(in) / op.file, fs::path(out) / op.file);
      if (!st.ok()) {
        ctx.logger.Error(st.message());
        return 1;
      }
    }
  }
  Status st = WriteFileAtomic(fs::path(out) / "manifest.jsonl", kept);
  if (!st.ok()) {
    ctx.logger.Error(st.message());
    return 1;
  }
  ctx.logger.Info("Extracted " + std::to_string(count) + " operators into " + out);
  return count ? 0 : 1;
}

}  // namespace portkit::accuracy
