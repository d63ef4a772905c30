// RunConvert and RunExtract (api.h): working with the tensors of one dump.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "accuracy/api.h"
#include "accuracy/dump.h"
#include "accuracy/hdf5_dump.h"
#include "accuracy/safetensors.h"
#include "accuracy/tensor_files.h"
#include "core/atomic_file.h"
#include "core/csv_writer.h"
#include "core/input_files.h"
#include "core/output_policy.h"
#include "core/subprocess.h"

namespace portkit::accuracy {
namespace fs = std::filesystem;
namespace {

// Read pieces: 16 MiB of elements for .npy; 1 MiB for .txt, whose text is ~6x the binary size.
/// Elements per piece when a tensor is converted: bytes of input read at a time (a .txt line is
/// about 25 bytes per element, so its pieces are smaller).
constexpr size_t kHdf5NpyChunkBytes = 16u << 20, kHdf5TxtChunkBytes = 1u << 20;

/// What converting one HDF5 file produced; it travels from the isolated child as records.
struct Hdf5Conversion {
  std::vector<ConvertedFile> written;  ///< `file` relative to the file's output folder
  std::vector<std::string> skipped;
  std::vector<ConvertProblem> failed;
  std::string index_file;  ///< written at the end; empty when the file failed as a whole

  // Records: a tag character, then the fields separated by NUL.
  std::string Encode() const {
    std::string out;
    for (const auto& w : written)
      AppendRecord(out, std::string("W") + w.file + '\0' + w.source + '\0' + (w.widened ? "1" : "0"));
    for (const auto& s : skipped) AppendRecord(out, "S" + s);
    for (const auto& f : failed) AppendRecord(out, "F" + std::to_string(static_cast<int>(f.code)) + '\0' + f.message);
    if (!index_file.empty()) AppendRecord(out, "I" + index_file);
    return out;
  }
  static Hdf5Conversion Decode(std::string_view bytes) {
    Hdf5Conversion c;
    for (const std::string& r : ReadRecords(bytes)) {
      if (r.empty()) continue;
      std::string body = r.substr(1);
      switch (r[0]) {
        case 'W': {
          size_t a = body.find('\0'), b = a == std::string::npos ? a : body.find('\0', a + 1);
          if (b == std::string::npos) break;
          c.written.push_back({body.substr(0, a), body.substr(a + 1, b - a - 1), body.substr(b + 1) == "1"});
          break;
        }
        case 'S': c.skipped.push_back(body); break;
        case 'F': {
          size_t a = body.find('\0');
          if (a == std::string::npos) break;
          int code = std::atoi(body.substr(0, a).c_str());
          c.failed.push_back({body.substr(a + 1), static_cast<ErrorCode>(code)});
          break;
        }
        case 'I': c.index_file = body; break;
        default: break;
      }
    }
    return c;
  }
};

/// Converts every tensor of one HDF5 dump into `out` (see hdf5_dump.h for the layout): files
/// `{op}.{seqid}.{input|output}.{i}.{npy|txt}` plus `convert_index.csv` mapping each file to its
/// HDF5 path. Problems with single tensors are recorded in `c->failed`; the rest goes on. A
/// Status is returned for failures of the file as a whole.
Status ConvertHdf5File(const fs::path& file, const fs::path& out, ConvertType type, bool force,
                       uint64_t max_view_elements, Hdf5Conversion* c) {
  auto h5 = Hdf5File::Open(file, max_view_elements);
  if (!h5.ok()) return h5.status();
  auto listing = h5->List();
  if (!listing.ok()) return listing.status();
  c->skipped = listing->skipped;
  for (const auto& e : listing->errors) c->failed.push_back({e, ErrorCode::kUnsupported});
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return IoError(out.string() + ": cannot create: " + ec.message());
  const std::string ext(ConvertTypeName(type));
  // A file of the same name that portkit did not write is not replaced without --force.
  FolderOutputs outputs(out, "-out", force);
  PORTKIT_RETURN_IF_ERROR(outputs.Check("convert_index.csv"));
  CsvWriter index({"File", "HDF5 Path", "DType", "Shape", "Stored As"});
  std::set<std::string> names;
  for (const Hdf5Tensor& t : listing->tensors) {
    std::string name = SafeName(PrintableName(t.op)) + "." + SafeName(PrintableName(t.seqid)) + "." + t.role + "." +
                       std::to_string(t.index) + "." + ext;
    if (!names.insert(name).second) {  // e.g. operators `a.b` and `a_b`: both become a_b
      c->failed.push_back({file.string() + ": " + PrintableName(t.path) + ": not converted, " + name +
                               " was already written for another tensor",
                           ErrorCode::kInvalidArgument});
      continue;
    }
    if (Status may = outputs.Check(name); !may.ok()) {
      c->failed.push_back({may.message(), may.code()});
      continue;
    }
    auto f = StreamingFile::Create(out / name);
    if (!f.ok()) return f.status();
    bool widened = false;
    NpyDescr(t.dtype, &widened);
    Status st = type == ConvertType::kNpy ? f->Append(NpyHeader(t.dtype, t.shape)) : Status::Ok();
    std::string piece;
    if (st.ok())
      st = h5->Read(t, type == ConvertType::kNpy ? kHdf5NpyChunkBytes : kHdf5TxtChunkBytes,
                    [&](const uint8_t* data, size_t count) {
                      piece.clear();
                      if (type == ConvertType::kNpy) AppendNpyData(t.dtype, data, count, &piece);
                      else AppendTxtData(t.dtype, data, count, &piece);
                      return f->Append(piece);
                    });
    if (st.ok()) st = f->Commit();
    if (!st.ok()) {
      c->failed.push_back({st.message(), st.code()});
      continue;
    }
    outputs.Written(name);
    index.AddRow({name, PrintableName(t.path), std::string(DTypeName(t.dtype)), ShapeText(t.shape, ","), t.stored});
    c->written.push_back({name, file.string() + ":" + PrintableName(t.path), widened && type == ConvertType::kNpy});
  }
  PORTKIT_RETURN_IF_ERROR(WriteFileAtomic(out / "convert_index.csv", index.str()));
  outputs.Written("convert_index.csv");
  c->index_file = "convert_index.csv";
  return outputs.Commit();
}

/// `rel` below `base`'s relative position `dir` (both under the output folder).
std::string UnderOutput(const fs::path& out, const fs::path& dir, const std::string& name) {
  return (dir.lexically_relative(out) / name).lexically_normal().string();
}

// ---------------------------------------------------------------------------------------------
// convert: find the inputs → convert each HDF5 file (in a child) → convert each safetensors file

/// The tensor files a convert reads.
struct ConvertInputs {
  std::vector<std::pair<fs::path, std::string>> files;  ///< safetensors: path, stem of the output names
  std::vector<std::pair<fs::path, fs::path>> h5_files;  ///< HDF5: path, output folder
};

/// The HDF5 files below the folder `input`, each with its output folder below `out`; a link or
/// other non-file of an HDF5 name goes to `report->skipped`. An error when there is none.
Status FindHdf5Files(const fs::path& input, const fs::path& out, ConvertInputs* inputs, ConvertReport* report) {
  auto& h5_files = inputs->h5_files;
  // Links are never followed, FIFOs never opened, earlier outputs never entered (docs/safety.md).
  WalkOptions walk;
  walk.exclude = {out};
  for (const auto& e : WalkInputTree(input, walk)) {
    if (!HasHdf5Extension(e.path)) continue;
    if (e.kind != InputEntry::Kind::kFile) {
      report->skipped.push_back((input / e.rel).string() + ": " + e.note);
      continue;
    }
    h5_files.push_back({e.path, out / fs::path(e.rel).replace_extension()});
  }
  std::sort(h5_files.begin(), h5_files.end());
  // a.h5 and a.hdf5 side by side: keep the extension in the folder names of all but the first.
  std::set<fs::path> used;
  for (auto& [path, dir] : h5_files)
    if (!used.insert(dir).second) {
      dir += path.extension();
      used.insert(dir);
    }
  if (h5_files.empty())
    return InvalidArgument(input.string() + ": neither a portkit dump (no manifest.jsonl) nor a folder with .h5 files");
  return Status::Ok();
}

/// What `input` holds to convert: a portkit dump's tensor files, a folder's HDF5 files, or the one
/// file it is.
Status FindConvertInputs(const fs::path& input, const fs::path& out, ConvertInputs* inputs, ConvertReport* report) {
  std::error_code ec;
  if (fs::is_directory(input, ec)) {
    if (!fs::exists(input / "manifest.jsonl", ec)) return FindHdf5Files(input, out, inputs, report);
    auto dump = Dump::Load(input);
    if (!dump.ok()) return dump.status();
    for (const auto& op : dump->ops)
      if (!op.file.empty())
        inputs->files.push_back({input / op.file, SafeName(std::to_string(op.index) + "." + op.name + "." + op.phase)});
    return Status::Ok();
  }
  if (!fs::exists(input, ec)) return NotFound(input.string() + " does not exist");
  if (HasHdf5Extension(input) || HasHdf5Signature(input)) inputs->h5_files.push_back({input, out});
  else inputs->files.push_back({input, input.stem().string()});
  return Status::Ok();
}

/// The child process of ConvertHdf5Isolated: converts, then writes what happened to `fd` as
/// records. Exit status 0, 1 (the file failed) or 2 (the records could not be sent).
int ConvertHdf5Child(int fd, const fs::path& path, const fs::path& dir, const ConvertOptions& options) {
  Hdf5Conversion c;
  Status st = ConvertHdf5File(path, dir, options.type, options.force, options.max_view_elements, &c);
  if (!st.ok()) c.failed.push_back({st.message(), st.code()});
  std::string bytes = c.Encode();
  if (!WriteAllToFd(fd, bytes.data(), bytes.size())) return 2;
  return st.ok() ? 0 : 1;
}

/// Converts the HDF5 file `path` into the folder `dir` in a child process: a corrupt file that
/// crashes the HDF5 library fails that file only. What it wrote and what failed go to `report`.
void ConvertHdf5Isolated(const fs::path& path, const fs::path& dir, const ConvertOptions& options,
                         ConvertReport* report) {
  const fs::path& out = options.output;
  auto run = RunIsolated(path, {dir}, [&](int fd) { return ConvertHdf5Child(fd, path, dir, options); });
  if (!run.ok()) {
    report->failed.push_back({run.status().message(), run.status().code()});
    ++report->input_files_failed;
    return;
  }
  Hdf5Conversion c = Hdf5Conversion::Decode(run->report);
  for (auto& w : c.written) {
    w.file = UnderOutput(out, dir, w.file);
    report->widened += w.widened;
    report->written.push_back(std::move(w));
  }
  for (auto& s : c.skipped) report->skipped.push_back(std::move(s));
  for (auto& f : c.failed) report->failed.push_back(std::move(f));
  if (!c.index_file.empty()) report->index_files.push_back(UnderOutput(out, dir, c.index_file));
  if (run->exit_code == 0) return;
  ++report->input_files_failed;
  if (run->exit_code == 2)
    report->failed.push_back({path.string() + ": the conversion report was lost", ErrorCode::kInternal});
  // The worker ended with a failure it did not report (the HDF5 library exited, or a
  // sanitizer stopped it): the file failed all the same, never a clean pass.
  else if (c.failed.empty())
    report->failed.push_back({path.string() + ": corrupt HDF5 file: reading it stopped the worker (exit status " +
                                  std::to_string(run->exit_code) + ") before it reported",
                              ErrorCode::kParse});
}

/// Writes the tensor `t` of `f` to `dest` as `type`. Streamed in pieces (docs/safety.md, Limits):
/// memory is one piece, whatever the tensor's size, and the pages of the input already converted
/// are dropped. `*widened`: a bf16/fp8 tensor written as float32.
Status WriteConvertedTensor(const SafetensorsFile& f, const TensorInfo& t, const fs::path& dest, ConvertType type,
                            bool* widened) {
  auto file = StreamingFile::Create(dest);
  if (!file.ok()) return file.status();
  Status st = Status::Ok();
  std::string piece;
  if (type == ConvertType::kNpy) {
    NpyDescr(t.dtype, widened);
    st = file->Append(NpyHeader(t.dtype, t.shape));
  }
  const size_t element = std::max<size_t>(1, DTypeSize(t.dtype));
  const uint64_t step =
      std::max<uint64_t>(1, (type == ConvertType::kNpy ? kHdf5NpyChunkBytes : kHdf5TxtChunkBytes) / element);
  for (uint64_t first = 0; st.ok() && first < t.numel(); first += step) {
    uint64_t count = std::min<uint64_t>(step, t.numel() - first);
    piece.clear();
    const uint8_t* data = f.Data(t) + first * element;
    if (type == ConvertType::kNpy) AppendNpyData(t.dtype, data, count, &piece);
    else AppendTxtData(t.dtype, data, count, &piece);
    st = file->Append(piece);
    f.Release(t, first, count);
  }
  if (st.ok()) st = file->Commit();
  return st;
}

/// Converts every tensor of the safetensors file `path` into files `{stem}.{key}.{ext}` of the
/// output folder. A file that cannot be read, or a name that may not be written, is listed in
/// `report->failed`; an output that cannot be written is an error (nothing later could be either).
Status ConvertSafetensorsFile(const fs::path& path, const std::string& stem, const ConvertOptions& options,
                              FolderOutputs& outputs, ConvertReport* report) {
  auto f = SafetensorsFile::Open(path);
  if (!f.ok()) {
    report->failed.push_back({f.status().message(), f.status().code()});
    ++report->input_files_failed;
    return Status::Ok();
  }
  const std::string ext(ConvertTypeName(options.type));
  for (const auto& [key, t] : f->tensors()) {
    bool widened = false;
    // The key is input data: one sanitised file name, never a path out of `out`.
    std::string name = SafeFileName(stem + "." + key + "." + ext);
    if (Status may = outputs.Check(name); !may.ok()) {
      report->failed.push_back({may.message(), may.code()});
      continue;
    }
    PORTKIT_RETURN_IF_ERROR(WriteConvertedTensor(*f, t, options.output / name, options.type, &widened));
    outputs.Written(name);
    report->widened += widened;
    report->written.push_back({name, path.string() + ":" + key, widened});
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// extract: check the output → an HDF5 file (in a child), or a dump: select → write

/// Refuses an output that is the input, lies inside the input dump, or (without --force) is an
/// existing dump or file; `*hdf5_append`: the output is an HDF5 file to append to.
Status CheckExtractOutput(const ExtractOptions& options, bool* hdf5_append) {
  const fs::path& in = options.input;
  const fs::path& out = options.output;
  std::error_code ec;
  // Never the input, and never an existing dump or file without --force (docs/safety.md).
  if (fs::exists(out, ec) && fs::equivalent(in, out, ec))
    return InvalidArgument("-o " + out.string() + " is the input itself; extract writes a new dump, give another -o");
  if (fs::is_directory(in, ec))
    for (fs::path p = fs::absolute(out, ec).lexically_normal(); p.has_relative_path(); p = p.parent_path())
      if (fs::exists(p, ec) && fs::equivalent(p, in, ec))
        return InvalidArgument("-o " + out.string() + " is inside the input dump " + in.string() +
                               "; give -o outside it");
  *hdf5_append = !options.force && IsHdf5Input(in) && fs::is_regular_file(out, ec);
  if (!options.destination.empty() && !IsHdf5Input(in))
    return InvalidArgument("-d (a destination path) is for HDF5 dumps only");
  if (!options.force && !*hdf5_append && fs::exists(out, ec)) {
    bool is_folder = fs::is_directory(out, ec);
    if (!is_folder || !fs::is_empty(out, ec))
      return InvalidArgument("-o " + out.string() + " already exists" +
                             (is_folder && fs::exists(out / "manifest.jsonl", ec) ? " and holds a dump" : "") +
                             "; it is not overwritten: give a new -o, or --force to replace it");
  }
  return Status::Ok();
}

/// The child process of ExtractFromHdf5: ExtractHdf5, its result written to `fd` as records (`E`
/// an error, `C` copied, `M` missing, `V` covered, `A` appended). Exit status 0, or 2 when the
/// records could not be sent.
int ExtractHdf5Child(int fd, const ExtractOptions& options, bool append) {
  std::string bytes;
  auto res = ExtractHdf5(options.input, options.output, options.select, options.destination, append);
  if (!res.ok()) {
    AppendRecord(bytes, "E" + std::to_string(static_cast<int>(res.status().code())) + '\0' + res.status().message());
  } else {
    for (const auto& c : res->copied) AppendRecord(bytes, "C" + c);
    for (const auto& m : res->missing) AppendRecord(bytes, "M" + m);
    for (const auto& c : res->covered) AppendRecord(bytes, "V" + c);
    if (res->appended) AppendRecord(bytes, "A");
  }
  return WriteAllToFd(fd, bytes.data(), bytes.size()) ? 0 : 2;
}

/// The records of ExtractHdf5Child into `report`; the error they carry, if any.
Status ReadExtractRecords(std::string_view records, ExtractReport* report) {
  for (const std::string& r : ReadRecords(records)) {
    if (r.empty()) continue;
    std::string body = r.substr(1);
    if (r[0] == 'E') {
      size_t a = body.find('\0');
      return Status(static_cast<ErrorCode>(std::atoi(body.substr(0, a).c_str())),
                    a == std::string::npos ? body : body.substr(a + 1));
    }
    if (r[0] == 'A') {
      report->appended = true;
      continue;
    }
    (r[0] == 'C' ? report->extracted : r[0] == 'M' ? report->missing : report->covered).push_back(body);
  }
  return Status::Ok();
}

/// Extracts groups of an HDF5 file, in a child process: a corrupt file that crashes the HDF5
/// library is an error, not a crash.
Status ExtractFromHdf5(const ExtractOptions& options, bool append, ExtractReport* report, Context& ctx) {
  const fs::path& in = options.input;
  const fs::path& out = options.output;
  std::error_code ec;
  report->hdf5 = true;
  fs::path out_dir = fs::absolute(out, ec).parent_path();
  auto run = RunIsolated(in, {out_dir}, [&](int fd) { return ExtractHdf5Child(fd, options, append); });
  if (!run.ok()) return run.status();
  if (run->exit_code == 2) return Status(ErrorCode::kInternal, in.string() + ": the extraction report was lost");
  // Ended with a failure it did not report (the HDF5 library exited, or a sanitizer stopped it).
  if (run->exit_code != 0)
    return ParseError(in.string() + ": corrupt HDF5 file: reading it stopped the worker (exit status " +
                      std::to_string(run->exit_code) + ") before it reported");
  PORTKIT_RETURN_IF_ERROR(ReadExtractRecords(run->report, report));
  if (report->extracted.empty()) {
    std::string list;
    for (const auto& m : report->missing) list += (list.empty() ? "" : ", ") + m;
    return InvalidArgument("Nothing to extract: none of " + list + " is in " + in.string() + "; " + out.string() +
                           " not written");
  }
  report->files.push_back(out.string());
  ctx.logger.Info((report->appended ? "Appended " : "Extracted ") + std::to_string(report->extracted.size()) +
                  " groups " + (report->appended ? "to " : "into ") + out.string());
  return Status::Ok();
}

/// The operators of a dump an extract keeps, with their manifest lines as written.
struct DumpSelection {
  std::string kept;  ///< manifest.jsonl of the new dump
  std::vector<const DumpOp*> ops;
};

/// Whether the selector `n` is an operator index (digits only) rather than a part of a name.
bool IsIndexSelector(const std::string& n) {
  return !n.empty() && std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isdigit(c); });
}

/// The operators of `dump` (read from `in`) that `names` select: a number selects that operator
/// index; anything else is a part of the operator name. Names that select nothing go to
/// `report->missing`.
Expected<DumpSelection> SelectDumpOps(const fs::path& in, const Dump& dump, const std::vector<std::string>& names,
                                      ExtractReport* report) {
  if (auto probe = OpenInputFile(in / "manifest.jsonl", Links::kRefuse); !probe.ok()) return probe.status();
  std::ifstream manifest(in / "manifest.jsonl");
  std::string line;
  DumpSelection selection;
  std::vector<char> used(names.size(), 0);
  size_t i = 0;
  while (std::getline(manifest, line) && i < dump.ops.size()) {
    if (line.empty()) continue;  // as Dump::Load reads it
    const DumpOp& op = dump.ops[i++];
    bool want = false;
    for (size_t k = 0; k < names.size(); ++k) {
      const std::string& n = names[k];
      bool hit = IsIndexSelector(n) ? n == std::to_string(op.index) : op.name.find(n) != std::string::npos;
      used[k] |= hit;
      want |= hit;
    }
    if (!want) continue;
    selection.kept += line + "\n";
    selection.ops.push_back(&op);
  }
  for (size_t k = 0; k < names.size(); ++k)
    if (!used[k]) report->missing.push_back(names[k]);
  return selection;
}

/// Writes the new dump `out`: the selected operators' tensor files, their manifest lines and, when
/// the input was complete, the end-of-dump marker.
Status WriteExtractedDump(const fs::path& in, const fs::path& out, const Dump& dump, const DumpSelection& selection,
                          ExtractReport* report) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return IoError(out.string() + ": cannot create: " + ec.message());
  for (const DumpOp* op : selection.ops) {
    if (!op->file.empty()) {
      PORTKIT_RETURN_IF_ERROR(CopyFileAtomic(in / op->file, out / op->file));
      report->files.push_back(op->file);
    }
    report->extracted.push_back(op->name + "." + op->phase + "." + std::to_string(op->index));
  }
  PORTKIT_RETURN_IF_ERROR(WriteFileAtomic(out / "manifest.jsonl", selection.kept));
  report->files.push_back("manifest.jsonl");
  // Written last, as the dumper does: the new dump is complete (a truncated input stays reported
  // through the warning above, not hidden by a new marker).
  if (dump.complete) {
    PORTKIT_RETURN_IF_ERROR(
        WriteFileAtomic(out / kDumpEndMarker, "{\"records\": " + std::to_string(selection.ops.size()) + "}\n"));
    report->files.push_back(kDumpEndMarker);
  }
  return MarkOutput(out, "extract", report->files);
}

/// Extracts operators of a portkit dump folder into a new dump.
Status ExtractFromDump(const ExtractOptions& options, ExtractReport* report, Context& ctx) {
  const fs::path& in = options.input;
  const fs::path& out = options.output;
  std::error_code ec;
  if (!fs::is_directory(in, ec))
    return fs::exists(in, ec) ? ParseError(in.string() + ": neither a dump folder nor an HDF5 file")
                              : NotFound(in.string() + " does not exist");
  auto dump = Dump::Load(in);
  if (!dump.ok()) return dump.status();
  if (!dump->warning.empty()) report->warnings.push_back(dump->warning);
  auto selection = SelectDumpOps(in, *dump, options.select, report);
  if (!selection.ok()) return selection.status();
  if (selection->ops.empty())
    return InvalidArgument("Nothing to extract: no operator of " + in.string() + " matches the selection; " +
                           out.string() + " not written");
  PORTKIT_RETURN_IF_ERROR(WriteExtractedDump(in, out, *dump, *selection, report));
  ctx.logger.Info("Extracted " + std::to_string(selection->ops.size()) + " operators into " + out.string());
  return Status::Ok();
}

}  // namespace

std::string_view ConvertTypeName(ConvertType type) { return type == ConvertType::kTxt ? "txt" : "npy"; }

bool IsHdf5Input(const fs::path& input) {
  std::error_code ec;
  return !fs::is_directory(input, ec) && (HasHdf5Extension(input) || HasHdf5Signature(input));
}

Expected<ConvertReport> RunConvert(const ConvertOptions& options, Context& ctx) {
  const fs::path& input = options.input;
  const fs::path& out = options.output;
  ConvertReport report;
  report.input = input.string();
  report.output = out.string();
  report.type = options.type;
  const std::string ext(ConvertTypeName(options.type));
  ConvertInputs inputs;
  PORTKIT_RETURN_IF_ERROR(FindConvertInputs(input, out, &inputs, &report));
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return IoError(out.string() + ": cannot create: " + ec.message());
  // What a killed earlier convert left half-written (`NAME.tmp.<pid>`) goes (docs/safety.md).
  for (const auto& name : RemoveStaleTemporaries(out))
    ctx.logger.Info("Removed " + (out / name).string() + ", left by an earlier run that was killed.");
  report.input_files = inputs.h5_files.size() + inputs.files.size();
  FolderOutputs outputs(out, "-out", options.force);
  for (const auto& [path, dir] : inputs.h5_files) ConvertHdf5Isolated(path, dir, options, &report);
  for (const auto& [path, stem] : inputs.files)
    PORTKIT_RETURN_IF_ERROR(ConvertSafetensorsFile(path, stem, options, outputs, &report));
  PORTKIT_RETURN_IF_ERROR(outputs.Commit());
  ctx.logger.Info(
      "Wrote " + std::to_string(report.written.size()) + " ." + ext + " files to " + out.string() +
      (report.widened ? "; " + std::to_string(report.widened) + " bf16/fp8 tensors widened to float32" : ""));
  return report;
}

Expected<ExtractReport> RunExtract(const ExtractOptions& options, Context& ctx) {
  ExtractReport report;
  report.input = options.input.string();
  report.output = options.output.string();
  bool hdf5_append = false;
  PORTKIT_RETURN_IF_ERROR(CheckExtractOutput(options, &hdf5_append));
  if (IsHdf5Input(options.input)) {
    PORTKIT_RETURN_IF_ERROR(ExtractFromHdf5(options, hdf5_append, &report, ctx));
  } else {
    PORTKIT_RETURN_IF_ERROR(ExtractFromDump(options, &report, ctx));
  }
  return report;
}

}  // namespace portkit::accuracy
