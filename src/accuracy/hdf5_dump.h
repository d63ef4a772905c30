#pragma once
/// HDF5 dumps in the layout `/op_name/seqid/...` (PyTorch 1.5 `torch.utils.dumper`; operators are
/// extracted from them with `h5copy -s /op1/seqid/ -d /op1/seqid/`). docs/accuracy.md
/// describes the convention; in short, under each `/op_name/seqid` group:
///
/// - groups `input` and `output`, whose children are the tensors in order: a dataset is one
///   tensor (`/add/3/input/self`, or `/add/3/input/0`); a group is a tensor list whose datasets
///   follow one another (`/cat/1/input/tensors/tensors_0`, `..._1`) — the Ascend dumper's layout;
/// - or datasets named `input.N` / `input_N` / `output.N` / `output_N` directly under the seqid
///   group (`input` / `output` as a dataset is that role's only tensor).
///
/// Order: link creation order where the group indexes it (h5py's track_order=True), otherwise
/// natural name order (`2` before `10`); flat `input.N` datasets come after a group's children,
/// by N. The position in that order is the tensor's index `i` in `input.{i}`. Other objects are
/// skipped with a note (as are soft and external links), never followed.
///
/// Attributes of the Ascend dumper that are honoured: `Type` = 18 (TensorOptions, no data) skips
/// the dataset; `DataType` = 2 (uint8) or 9 (bool) on an 8-bit integer dataset reinterprets it
/// as U8 / BOOL (the dumper stored both as int8). Its fp16 tensors were stored as float32
/// (`DataType` = 10): they stay float32, the values the file holds.
///
/// Every error names the file and the object path. The library's own error printing is switched
/// off for the duration of each call and its messages folded into the Status instead.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "accuracy/dtype.h"
#include "accuracy/tensor_data_file.h"
#include "core/status.h"

namespace portkit::accuracy {

struct Hdf5Tensor {
  std::string op, seqid;          ///< HDF5 link names of the operator and seqid groups
  std::string role;               ///< "input" or "output"
  size_t index = 0;               ///< position within the role (see the order above)
  std::string path;               ///< the dataset's full path, e.g. /add/3/input/self
  DType dtype = DType::kUnknown;  ///< element type as read and written by convert
  std::vector<int64_t> shape;     ///< empty for a scalar dataset
  std::string stored;             ///< the stored HDF5 type when it differs from dtype's, else empty
  uint64_t stored_bytes =
      0;  ///< bytes the file holds for it (H5Dget_storage_size; compressed, or 0 when no chunk was written)
  uint64_t numel() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
};

struct Hdf5Listing {
  std::vector<Hdf5Tensor> tensors;
  std::vector<std::string> skipped;  ///< objects outside the convention (notes, not errors)
  std::vector<std::string> errors;   ///< tensors that cannot be read (unsupported type, ...)
};

/// True when the file starts with the HDF5 signature (at offset 0; user blocks are not probed).
bool HasHdf5Signature(const std::filesystem::path& path);

/// True for names ending in .h5, .hdf5 or .he5 (case-insensitive).
bool HasHdf5Extension(const std::filesystem::path& path);

class Hdf5File {
 public:
  /// Opens read-only. A file that is not HDF5, or is truncated or corrupt, is an error naming it.
  /// `max_view_elements` (0: no cap) bounds the elements of a dataset that its stored bytes do not
  /// hold: one whose elements take more than kMaxHdf5Expansion times the bytes the file stores for
  /// it (chunks never written read as the fill value, so a few bytes of header can declare 2^60
  /// elements) is read only up to this many elements; Read refuses it beyond ("over the limit").
  static Expected<Hdf5File> Open(const std::filesystem::path& path,
                                 uint64_t max_view_elements = kDefaultMaxViewElements);
  Hdf5File(Hdf5File&& o) noexcept : path_(std::move(o.path_)), id_(o.id_), max_view_elements_(o.max_view_elements_) {
    o.id_ = -1;
  }
  Hdf5File& operator=(Hdf5File&&) = delete;
  Hdf5File(const Hdf5File&) = delete;
  ~Hdf5File();

  const std::filesystem::path& path() const { return path_; }

  /// Walks `/op_name/seqid/...`; operators and seqids in natural order.
  Expected<Hdf5Listing> List() const;

  /// Streams a tensor's elements (C order, little-endian, `t.dtype`) to `sink` in pieces of at
  /// most `max_bytes` (at least one element), read as hyperslabs: the file is never read whole.
  /// Its element count is checked against Open's `max_view_elements` before anything is read.
  Status Read(const Hdf5Tensor& t, size_t max_bytes,
              const std::function<Status(const uint8_t* data, size_t count)>& sink) const;

 private:
  Hdf5File(std::filesystem::path path, int64_t id) : path_(std::move(path)), id_(id) {}
  friend Expected<struct Hdf5ExtractResult> ExtractHdf5(const std::filesystem::path&, const std::filesystem::path&,
                                                        const std::vector<std::string>&,
                                                        const std::vector<std::string>&, bool);
  std::filesystem::path path_;
  int64_t id_ = -1;  ///< hid_t
  uint64_t max_view_elements_ = kDefaultMaxViewElements;
};

/// How many times its stored bytes a dataset's elements may take before they count as not held by
/// the file (the expansion bound of compressed traces, docs/safety.md): real compressed tensors
/// take 1-10 times their stored bytes, a dataset whose chunks were never written takes infinitely
/// many.
inline constexpr uint64_t kMaxHdf5Expansion = 100;

/// How an isolated run ended normally: `work`'s return value and the bytes it wrote to its
/// report descriptor.
struct IsolatedRun {
  int exit_code = 0;
  std::string report;
};

/// Runs `work(report_fd)` in a forked child process (portkit::RunForked). HDF5 1.10's decoders can
/// crash on a corrupt file (seen with flipped bytes in object headers); run in the child, such a
/// crash ends the child and comes back as a kParse error naming `file` ("corrupt HDF5 file: the
/// HDF5 library crashed reading it") instead of killing portkit. Results come back only through
/// what `work` writes to `report_fd` (see AppendRecord). Temporary files the child left in
/// `tmp_dirs` (`*.tmp.<child pid>`, see StreamingFile and ExtractHdf5) are removed.
Expected<IsolatedRun> RunIsolated(const std::filesystem::path& file, const std::vector<std::filesystem::path>& tmp_dirs,
                                  const std::function<int(int report_fd)>& work);

/// A length-prefixed record, for reports sent back from an isolated child.
void AppendRecord(std::string& out, std::string_view value);
/// The records of `in`, in order (an incomplete last record is dropped).
std::vector<std::string> ReadRecords(std::string_view in);

/// `name` with control characters and bytes that are not UTF-8 written as `\xNN` (names read
/// from a damaged file end up in messages and file names).
std::string PrintableName(const std::string& name);

struct Hdf5ExtractResult {
  std::vector<std::string> copied;   ///< normalised paths copied, in the order given
  std::vector<std::string> missing;  ///< names not found in the input
  std::vector<std::string> covered;  ///< names already inside another selected operator
  bool appended = false;             ///< copied into the existing output file (h5copy's way)
};

/// Copies the named objects (`/op_name` or `/op_name/seqid`; the leading '/' may be left out, a
/// trailing '/' is ignored) with H5Ocopy, parents created as needed, to `destinations[i]` (the
/// same path when `destinations` is empty; otherwise one per name, normalised the same way). With
/// `append` and an existing `out`, the objects are added to that file as repeated `h5copy -s X -d
/// X -p` runs add them (an object already at a destination is an error naming it, as in h5copy);
/// otherwise into a new file. Either way the result is written to a temporary name (a copy of the
/// existing file when appending) and renamed onto `out` once complete, so a failure leaves `out`
/// as it was. Nothing is written when no name is found.
Expected<Hdf5ExtractResult> ExtractHdf5(const std::filesystem::path& in, const std::filesystem::path& out,
                                        const std::vector<std::string>& names,
                                        const std::vector<std::string>& destinations = {}, bool append = false);

}  // namespace portkit::accuracy
