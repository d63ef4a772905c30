#pragma once
/// A dump folder written by `portkit.torch.dumper`: manifest.jsonl (one operator per line) and
/// op_NNNNNN.safetensors files. A truncated last manifest line (a crash mid-write) is ignored and
/// reported.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace portkit::accuracy {

struct DumpTensor {
  std::string key;    ///< input.0, output.1, ...
  std::string dtype;  ///< safetensors name
  std::vector<int64_t> shape;
  double max = 0, min = 0, mean = 0, norm = 0;
  bool has_stats = false;
  int64_t crc32 = -1;          ///< checksum of the exact bytes; -1 when the dump has none
  int64_t nan = -1, inf = -1;  ///< counts of nan / ±inf elements; -1 when the dump has none
  /// Why the dumper kept no data for it (e.g. an element type safetensors cannot store).
  std::string note;
  int8_t requires_grad = -1;    ///< msprobe's requires_grad: 1 / 0, -1 when the dump does not say
  bool integral_stats = false;  ///< msprobe wrote the statistics as integers (integer tensors)
  std::string data_name;        ///< msprobe's tensor data file (tensor mode), empty otherwise

  /// Whether the tensor holds inf or nan, from the counts or else the statistics; false when the
  /// manifest says nothing about it.
  bool NonFinite() const;
};

/// An argument of an msprobe call that is not a tensor (a bool flag, a number, a dtype, a None):
/// msprobe's compare lists it as a row of its own; portkit compares tensors only.
struct DumpScalar {
  std::string key;    ///< `input.1`, `input.inplace`, `output.1`
  std::string type;   ///< msprobe's type name (`bool`, `int`, `float`, ...); empty for a None
  std::string value;  ///< as Python prints it: `False`, `1`, `0.5`, `None`
  size_t before = 0;  ///< the number of the call's tensors listed before it
};

struct DumpOp {
  int64_t index = 0;
  std::string name, kind, phase, module, stack, file;  ///< file empty for stats-only
  bool overflow = false;
  std::string replay_status;      ///< "ok" / "skipped" for a replayed run, else empty
  int64_t replay_reference = -1;  ///< manifest index of the reference op it was replayed from
  std::string call;  ///< msprobe's name of the call (`Functional.linear.0.forward`); empty for portkit dumps
  /// A backward operator: the forward operator its autograd node was made by, as
  /// `aten::mul #12 (MulBackward0)` (manifest `forward`); empty when the dump does not say.
  std::string forward;
  std::vector<DumpTensor> tensors;
  std::vector<DumpScalar> scalars;  ///< msprobe dumps: the non-tensor arguments, in call order
};

/// The end-of-dump marker the dumper writes last, `{"records": N}`: without it (or with another
/// count than the manifest's) the dump was cut short, e.g. by kill -9 (docs/safety.md).
inline constexpr const char* kDumpEndMarker = "dump_complete.json";

struct Dump {
  std::filesystem::path dir;
  std::vector<DumpOp> ops;
  std::string warning;    ///< e.g. an incomplete last line, a missing end-of-dump marker
  bool complete = false;  ///< the end marker is there and counts the manifest's records

  /// Every operator at once (DumpReader read to the end).
  static Expected<Dump> Load(const std::filesystem::path& dir);
};

/// A dump's operators one at a time, in execution order, so a reader need not hold them all:
/// a portkit manifest is parsed line by line; an msprobe dump.json (one JSON document) is read as
/// a stream, one call at a time (MsprobeDumpReader; `max_call_bytes` caps one call, 0: none). Once Next() has said
/// there are no more, warning() and complete() are those of Dump::Load (the end-of-dump marker checked against the
/// count).
class DumpReader {
 public:
  static Expected<DumpReader> Open(const std::filesystem::path& dir, uint64_t max_call_bytes = uint64_t{64} << 20);
  DumpReader(DumpReader&&) noexcept;
  DumpReader& operator=(DumpReader&&) noexcept;
  ~DumpReader();

  /// The next operator into `op` (replaced): true, or false at the end; an error for a damaged
  /// record (only a cut last line is tolerated, and reported in warning()).
  Expected<bool> Next(DumpOp& op);
  const std::filesystem::path& dir() const;
  const std::string& warning() const;  ///< complete only at the end
  bool complete() const;               ///< set at the end
  size_t count() const;                ///< operators read so far

 private:
  struct State;
  explicit DumpReader(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

/// Reads the rest of `reader` (a DumpReader or an MsprobeDumpReader) into `d.ops`, then takes the
/// reader's warning: what Dump::Load and LoadMsprobeDump share.
template <class Reader>
Status ReadAllOps(Reader& reader, Dump& d) {
  for (DumpOp op;;) {
    auto more = reader.Next(op);
    if (!more.ok()) return more.status();
    if (!*more) break;
    d.ops.push_back(std::move(op));
  }
  d.warning = reader.warning();
  d.ops.shrink_to_fit();
  return Status::Ok();
}

}  // namespace portkit::accuracy
