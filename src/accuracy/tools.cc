#include "accuracy/tools.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "accuracy/dump.h"
#include "accuracy/safetensors.h"
#include "core/atomic_file.h"
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

/// Seed naming: '.', '/', '\\' and spaces in names become '_'.
std::string SafeName(std::string s) {
  for (char& c : s)
    if (c == '.' || c == '/' || c == '\\' || c == ' ' || c == ':') c = '_';
  return s;
}

/// numpy descr of a dtype as written (bf16 and fp8 are widened to float32: .npy cannot hold them).
const char* NpyDescr(DType t, bool* widened) {
  *widened = false;
  switch (t) {
    case DType::kF64: return "<f8";
    case DType::kF32: return "<f4";
    case DType::kF16: return "<f2";
    case DType::kI64: return "<i8";
    case DType::kI32: return "<i4";
    case DType::kI16: return "<i2";
    case DType::kI8: return "|i1";
    case DType::kU8: return "|u1";
    case DType::kBool: return "|b1";
    default:
      *widened = true;
      return "<f4";
  }
}

std::string NpyBytes(const TensorInfo& t, const uint8_t* data, bool* widened) {
  const char* descr = NpyDescr(t.dtype, widened);
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 ? "," : i + 1 < t.shape.size() ? ", " : "");
  shape += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY\x01";
  out.push_back('\0');
  uint16_t len = static_cast<uint16_t>(header.size());
  out.push_back(static_cast<char>(len & 0xFF));
  out.push_back(static_cast<char>(len >> 8));
  out += header;
  if (!*widened) {
    out.append(reinterpret_cast<const char*>(data), t.end - t.begin);
  } else {
    std::vector<double> v(t.numel());
    DecodeToDouble(t.dtype, data, v.size(), v.data());
    for (double x : v) {
      float f = static_cast<float>(x);
      out.append(reinterpret_cast<const char*>(&f), 4);
    }
  }
  return out;
}

std::string TxtBytes(const TensorInfo& t, const uint8_t* data) {
  std::vector<double> v(t.numel());
  DecodeToDouble(t.dtype, data, v.size(), v.data());
  std::string out;
  char buf[40];
  for (double x : v) {
    std::snprintf(buf, sizeof buf, "%.18e\n", x);  // numpy.savetxt's default format
    out += buf;
  }
  return out;
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
  CLI::App app{"Convert dump tensors to .npy (bf16/fp8 widened to fp32) or .txt (flattened, one value a line).",
               "portkit convert"};
  app.add_option("-d,--dump", input, "a dump folder or one .safetensors file")->required();
  app.add_option("--out,-O", out, "output folder; also -out")->required();
  app.add_option("-t,--type", type, "npy (default) or txt")->check(CLI::IsMember({"npy", "txt"}));
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) args.push_back(std::string(argv[i]) == "-out" ? "--out" : argv[i]);
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  if (int rc = Parse(app, static_cast<int>(cargv.size()), cargv.data()); rc >= 0) return rc;
  std::vector<std::pair<fs::path, std::string>> files;  // path, stem
  std::error_code ec;
  if (fs::is_directory(input, ec)) {
    auto dump = Dump::Load(input);
    if (!dump.ok()) {
      ctx.logger.Error(dump.status().message());
      return 2;
    }
    for (const auto& op : dump->ops)
      if (!op.file.empty())
        files.push_back({fs::path(input) / op.file, SafeName(std::to_string(op.index) + "." + op.name + "." + op.phase)});
  } else if (fs::exists(input, ec)) {
    files.push_back({input, fs::path(input).stem().string()});
  } else {
    ctx.logger.Error(input + " does not exist");
    return 2;
  }
  fs::create_directories(out, ec);
  size_t written = 0, widened_count = 0;
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
  return 0;
}

int ExtractMain(int argc, char** argv, Context& ctx) {
  std::string in, out;
  std::vector<std::string> names;
  CLI::App app{"Copy the named operators of a dump into a new dump (the seed's h5copy step).", "portkit extract"};
  app.add_option("-i,--input", in, "the dump folder")->required();
  app.add_option("-o,--output", out, "the new dump folder")->required();
  app.add_option("-s,--select", names, "operator names (an op is kept when its name contains one) or indices")->required();
  if (int rc = Parse(app, argc, argv); rc >= 0) return rc;
  auto dump = Dump::Load(in);
  if (!dump.ok()) {
    ctx.logger.Error(dump.status().message());
    return 2;
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  std::ifstream manifest(fs::path(in) / "manifest.jsonl");
  std::string line, kept;
  size_t i = 0, count = 0;
  while (std::getline(manifest, line) && i < dump->ops.size()) {
    const DumpOp& op = dump->ops[i++];
    bool want = false;
    for (const auto& n : names) want |= op.name.find(n) != std::string::npos || n == std::to_string(op.index);
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
